"""The AppNorth dev server, one module per concern.

protocol (limits, errors, request/response types), jsonutil, validation,
storage (SQLite), idempotency (Idempotency-Key replay), faults, requestlog,
confighub (config stream hub and SSE), settings, api (/v1 routes), admin
(/admin routes), routing, httpd (HTTP handler, tracked connections, TLS) and
server (the DevServer facade). devserver/appnorth_devserver.py is the command.
"""
