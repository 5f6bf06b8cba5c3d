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

# Steady-state training tokens/s of a run at batch 8 x 1024 from its train_log.csv, steps 3-11
# (step 1 compiles the pipelines; the last step also evaluates). tokens_per_s (column 5) is the
# mean since step 0, so step s ends at s * 8192 / column 5.
#   train_speed LOG.csv LABEL
train_speed() {
  awk -F, -v label="$2" '$1 == 3 {t3 = 3 * 8192 / $5} $1 == 11 {t11 = 11 * 8192 / $5}
    END {printf "%s: %.0f tokens/s (batch 8 x 1024, steps 3-11)\n", label, 8 * 8192 / (t11 - t3)}' "$1"
}
