"""Layers shared by the encoders (fairseq's ``modules/``), one concern a module:

- ``attention``: :class:`MultiHeadAttention` (dense, relation-aware, shared + own + ragged keys);
- ``feed_forward``, ``add_norm``, ``transformer_layer``: the Transformer layer (post- or pre-LayerNorm);
- ``positions``: absolute position vectors; ``char_input``: an encoder's projected character input;
- ``sequence``: ``shift`` and ``masked_mean`` along the sequence;
- ``scalar_mix``: a learned weighted sum of a backbone's layers;
- ``old_names``: reading checkpoints saved before a module's parameters were renamed.
"""
