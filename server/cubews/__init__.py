"""Cube Store's WebSocket protocol: flatbuffers HttpMessage codec and the /ws endpoint."""
