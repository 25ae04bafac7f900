"""Dataset readers (registry kind ``reader``): lazy, one Instance per example, ``source=(path, line)``.

generic formats: jsonl_spans (NER as JSON lines of character spans), conll (token/tag columns),
table (TSV/CSV/JSON-lines classification and pairs), squad (SQuAD v1 MRC) |
ner: resume_ner, weibo_ner, msra_ner | classification: chnsenticorp, thucnews_titles |
pair: bq_corpus | mrc: cmrc2018, drcd | translation: tatoeba_cmn_eng, wmt_newstest, nist, parallel_refs, tvsub |
raw_text. All of them are ``FileReader``s (``readers.base``: lattices from a
``lattice_builder``, the hash-bucket ``split`` option, ``max_instances``), the base a plugin
reader subclasses too; the sentence-level ones are ``SentenceReader``s (``readers.sentence``).
Tokens come from ``multigrain.components.text``.
"""
