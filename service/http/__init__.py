"""The HTTP service on FastAPI: the application and its lifespan (:mod:`.app`, the composition
root that also mounts ``service.web``), the dependencies routes declare (:mod:`.deps`), one
routes module per resource (:mod:`.routes`), admission (:mod:`.admission`), auth
(:mod:`.auth`), errors (:mod:`.errors`), metrics (:mod:`.metrics`), logs (:mod:`.logs`) and the
OpenAPI document (:mod:`.openapi`)."""
