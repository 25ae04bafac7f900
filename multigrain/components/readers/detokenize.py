"""Undoing the Moses tokenisation of English references (``tokenizer.perl -l en`` output such as
TVsub's dev/test files: ``it &apos;s all taken care of .``), so that they read like the raw training
targets (``it's all taken care of.``) and BLEU compares like with like.

The rules are those of Moses ``detokenizer.perl`` for English:

- XML escapes (``&apos; &quot; &amp; &lt; &gt; &#N;``) are decoded first;
- ``@-@`` (aggressive hyphen splitting) joins its neighbours: ``well @-@ known`` -> ``well-known``;
- a token of currency signs or opening brackets attaches to the next token: ``( yes`` -> ``(yes``;
- a token of closing punctuation ``, . ? ! : ; % ) ] }`` attaches to the previous one;
- a token starting with an apostrophe and a letter (``'s 're n't``'s ``'t``) attaches to a previous
  token ending in a letter or digit: ``didn 't`` -> ``didn't``;
- quote tokens (``"``, ``'``) alternate: an opening one attaches to the next token, a closing one to
  the previous; a lone ``'`` after a word ending in ``s`` is a possessive (attached to it).
"""
from __future__ import annotations

import re

from multigrain.components.readers.nist import unescape_entities

_CLOSING = re.compile(r"^[,.?!:;%)\]}\\]+$")
_OPENING = re.compile(r"^[$£€¥(\[{¿¡]+$")
_QUOTES = re.compile(r"^['\"]+$")
_CLITIC = re.compile(r"^'[^\W\d_]")
_ENDS_ALNUM = re.compile(r"[^\W_]$")


def moses_detokenize(text: str) -> str:
    """English ``text`` as Moses ``detokenizer.perl -l en`` writes it (see the module docstring)."""
    text = unescape_entities(text)
    text = re.sub(r" @([-,.])@ ", r"\1", f" {text} ")
    words = text.split()
    out: list[str] = []
    glue_next = True  # no space before the first word
    quotes: dict[str, int] = {}
    for i, word in enumerate(words):
        previous = words[i - 1] if i else ""
        if _OPENING.match(word):
            out.append(("" if glue_next else " ") + word)
            glue_next = True
        elif _CLOSING.match(word):
            out.append(word)
            glue_next = False
        elif i and _CLITIC.match(word) and _ENDS_ALNUM.search(previous):
            out.append(word)
            glue_next = False
        elif _QUOTES.match(word):
            seen = quotes.get(word, 0)
            if seen % 2 == 0 and not (word == "'" and i and previous.endswith("s")):
                out.append(("" if glue_next else " ") + word)  # opening: glued to what follows
                glue_next = True
                quotes[word] = seen + 1
            else:
                out.append(word)  # closing (or a possessive): glued to what precedes
                glue_next = False
                if word != "'" or seen % 2 == 1:
                    quotes[word] = seen + 1
        else:
            out.append(("" if glue_next else " ") + word)
            glue_next = False
    return "".join(out)
