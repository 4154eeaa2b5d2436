#!/usr/bin/env python3
"""An example Python worker: serves the capability "text" with two actions.

    robonode --capability none &                       # a node that runs no tasks itself
    python3 examples/python/summarizer.py --node 127.0.0.1:7233 &
    roboctl submit examples/python/summarize.yaml --wait

Any number may run, against any nodes of a mesh (give each on one node its
own --name); stop one mid-task and its attempts move to another. SIGTERM
lets running attempts finish, then exits.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from typing import Any, Dict, List

from robonet import Context, Worker


def build(name: str, slots: int, pause: float) -> Worker:
    w = Worker(capability="text", slots=slots, name=name)

    @w.action("summarize")
    def summarize(ctx: Context, text: str, max_words: int = 12) -> Dict[str, Any]:
        """The first max_words words of each sentence's start, and the word count."""
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]
        logging.info("summarizing %d sentences", len(sentences))
        words: List[str] = []
        for i, s in enumerate(sentences):
            ctx.progress(done=i, total=len(sentences), message=f"sentence {i + 1} of {len(sentences)}")
            if pause:
                ctx.sleep(pause / max(1, len(sentences)))  # wakes (raising) when cancelled
            words.extend(s.split()[:3])
        return {"summary": " ".join(words[:max_words]), "words": len(text.split())}

    @w.action("total")
    def total(ctx: Context, numbers: List[float]) -> Dict[str, Any]:
        if not numbers:
            raise ValueError("nothing to add up (numbers is empty)")
        print(f"adding {len(numbers)} numbers")
        return {"total": sum(numbers)}

    return w


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--node", default=os.environ.get("ROBONET_ADDR", "127.0.0.1:7233"), help="gRPC address of any robonode")
    ap.add_argument("--name", default="summarizer", help="this program's name on the node (unique per node)")
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--pause", type=float, default=0, help="seconds each summary takes, to watch progress and failover")
    ap.add_argument("--tls-ca", default=None, help="the mesh CA's certificate (default $ROBONET_TLS_CA)")
    ap.add_argument("--token-file", default=None, help="a file holding the API token (default $ROBONET_TOKEN)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    token = None
    if args.token_file:
        from robonet._conn import read_token

        token = read_token(args.token_file)
    build(args.name, args.slots, args.pause).run(args.node, tls_ca=args.tls_ca, token=token)


if __name__ == "__main__":
    main()
