"""Channels to a robonode: TLS against the mesh CA, and an API token."""

from __future__ import annotations

import ipaddress
import os
from typing import Optional, Sequence, Tuple

import grpc

ENV_ADDR = "ROBONET_ADDR"
ENV_TOKEN = "ROBONET_TOKEN"
ENV_TLS_CA = "ROBONET_TLS_CA"
DEFAULT_ADDR = "127.0.0.1:7233"

Metadata = Sequence[Tuple[str, str]]


def is_loopback(addr: str) -> bool:
    """Whether addr (host:port) names only this machine."""
    host, _, _ = addr.rpartition(":")
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def read_token(path: str) -> str:
    """Reads an API token file: the first field of its first line that is not
    blank or a # comment (a line of a node's token file, TOKEN name=... role=...,
    works too)."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if fields and not fields[0].startswith("#"):
                return fields[0]
    raise ValueError(f"token file {path} holds no token")


def resolve(addr: Optional[str], tls_ca: Optional[str], token: Optional[str]) -> Tuple[str, Optional[str], Optional[str]]:
    """Fills in the defaults from the environment, as roboctl does."""
    return (
        addr or os.environ.get(ENV_ADDR) or DEFAULT_ADDR,
        tls_ca if tls_ca is not None else (os.environ.get(ENV_TLS_CA) or None),
        token if token is not None else (os.environ.get(ENV_TOKEN) or None),
    )


def channel(
    addr: str,
    tls_ca: Optional[str] = None,
    token: Optional[str] = None,
    tls_server_name: Optional[str] = None,
    options: Sequence[Tuple[str, object]] = (),
) -> Tuple[grpc.Channel, Metadata]:
    """Opens a channel to addr and returns it with the metadata every call carries.

    tls_ca is the path of the mesh CA's certificate (PEM): the channel is
    TLS and the node is verified against it; without it the channel is
    plaintext, and a token is refused beyond loopback.
    """
    opts = [
        ("grpc.max_receive_message_length", 64 << 20),
        ("grpc.keepalive_time_ms", 30_000),
        *options,
    ]
    if tls_ca:
        with open(tls_ca, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        if tls_server_name:
            opts.append(("grpc.ssl_target_name_override", tls_server_name))
        ch = grpc.secure_channel(addr, creds, options=opts)
    else:
        if token and not is_loopback(addr):
            raise ValueError(
                f"refusing to send the API token unencrypted to {addr}: give the mesh CA with tls_ca= (or ${ENV_TLS_CA})"
            )
        ch = grpc.insecure_channel(addr, options=opts)
    md: Metadata = (("authorization", f"Bearer {token}"),) if token else ()
    return ch, md
