"""The web trees the service serves beside its API: the operator dashboard
(:mod:`~service.web.dashboard`, static files under ``dashboard_files/``) and the browser page
(:mod:`~service.web.page`: static files under ``page_files/`` and the data routes of
:mod:`~service.web.page_data`, with the WebGPU path's plans in :mod:`~service.web.page_wgsl`),
all through :class:`~service.web.static.WebAssets`. Mounted by ``service.http.app``."""
