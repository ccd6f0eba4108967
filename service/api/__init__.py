"""The REST API: dependencies, response presenters and routers (`/api/v1`)."""
