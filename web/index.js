// The landing page was once "Watch it think": its old links (/?backend=…, /?checkpoint=…) still
// reach that page, now think.html.
const params = new URLSearchParams(location.search);
if (params.has('backend') || params.has('checkpoint')) location.replace(`think.html${location.search}`);
