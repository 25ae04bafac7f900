"""Static character vectors from m3e-small's input embedding table, for BiG's word2vec setting.

    python benchmarks/export_m3e_vectors.py [--model package:embedding/m3e-small] [--out runs/vectors]

The BiG paper's word2vec rows start from static character vectors pretrained on a large corpus;
none can be downloaded here, and ours (``pretrain_vectors.py``) see only the shared training text.
m3e-small's token embedding table (21,128 x 512, learned with the model on its large corpus) is
such a static table: one vector per vocabulary entry, no context. This writes the entries a
reader's character can be (whole tokens: no ``##`` continuations, no ``[...]`` specials) as
``<out>/m3e_chars.vec`` in word2vec text format, plus, for a lower-case Latin token whose
upper-case form is absent, that form with the same vector (the backbone lower-cases its input).
Needs the optional extra ``multigrain[m3e]``. ``*_big_m3e_vec`` specs read the file.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pretrain_vectors import write_vec  # noqa: E402  (benchmarks/ is on sys.path when run as a script)


def static_tokens(vocab: dict[str, int]) -> list[tuple[str, int]]:
    """``(token, row)`` for every whole token, plus upper-case forms of lower-case Latin ones."""
    kept = [(t, i) for t, i in sorted(vocab.items(), key=lambda kv: kv[1])
            if t and not t.startswith("##") and not (t.startswith("[") and t.endswith("]"))
            and not any(c.isspace() for c in t)]
    present = {t for t, _ in kept}
    upper = [(t.upper(), i) for t, i in kept if t.isascii() and t != t.upper() and t.upper() not in present]
    return kept + upper


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="package:embedding/m3e-small")
    parser.add_argument("--out", default="runs/vectors")
    args = parser.parse_args(argv)

    import torch

    from multigrain.components.embedders.hf_transformer import HfTransformer
    from multigrain.platform.errors import ConfigurationError

    try:
        backbone = HfTransformer(args.model)  # the token ids and weights the m3e specs' backbone loads
    except ConfigurationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    table = backbone.model.get_input_embeddings().weight.detach()
    pairs = static_tokens(backbone.token_ids)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_vec(out / "m3e_chars.vec", [t for t, _ in pairs], table[torch.tensor([i for _, i in pairs])])
    info = {"source": f"{args.model}: input embeddings", "tokens": len(pairs), "dim": table.shape[1],
            "single_characters": sum(len(t) == 1 for t, _ in pairs)}
    (out / "m3e_vectors.json").write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(info, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
