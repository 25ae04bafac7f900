"""Dataset readers (registry kind ``reader``): lazy, one Instance per example, ``source=(path, line)``.

ner: resume_ner, weibo_ner, msra_ner | classification: chnsenticorp, thucnews_titles |
pair: bq_corpus | mrc: cmrc2018, drcd | translation: tatoeba_cmn_eng, wmt_newstest, nist, parallel_refs, tvsub |
raw_text. All of them are ``FileReader``s (``readers.base``); the sentence-level ones are
``SentenceReader``s (``readers.sentence``). Tokens come from ``multigrain.components.text``.
"""
