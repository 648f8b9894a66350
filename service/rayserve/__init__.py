"""Scale-out on Ray Serve: the service's one FastAPI app (``service.http.app.create_app``) as a
Ray Serve deployment of N replicas, or autoscaled on ongoing requests (docs/ray.md). Ray is the
``ray`` extra, imported only by :mod:`.deployment` when a replica or a deployment is built."""
