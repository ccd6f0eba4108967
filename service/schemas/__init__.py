"""Request and response bodies of the REST API (the template ladder: `XCreate`, `XPublic`, `XsPublic`)."""
