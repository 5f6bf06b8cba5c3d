# Sourced by the device scripts on the lent GPU machine, after they set $root: the machine has
# the NVIDIA driver but no Vulkan loader or GL dispatch libraries, which the driver's Vulkan ICD
# (libGLX_nvidia) needs, so Debian's (carried in .gl) are unpacked; then the bundle
# (tools/device/bundle.sh) goes to /tmp/forge and $bin names its binaries.
#   FORGE_DEVICE_BUNDLE: another bundle (default .device/bundle.tar.xz); FORGE_DEVICE_DEST: where.
for deb in "$root"/.gl/*.deb; do dpkg -x "$deb" /; done
ldconfig
bin="${FORGE_DEVICE_DEST:-/tmp/forge}/bin"
mkdir -p "$(dirname "$bin")" && tar -C "$(dirname "$bin")" -xJf "${FORGE_DEVICE_BUNDLE:-$root/.device/bundle.tar.xz}"
export LD_LIBRARY_PATH="$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -e "$icd" ] && export VK_DRIVER_FILES="$icd"
