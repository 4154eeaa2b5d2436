"""Generated protobuf and gRPC modules of roboNet's API (scripts/generate-python; do not edit)."""
