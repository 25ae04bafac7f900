// Model sections and trainers of the NER specs (jsonnet_configs/ner/<dataset>_<model>.jsonnet),
// one per encoder, with the papers' settings where the papers give them. Every spec is
//   ner.spec(dataset, model, trainer, batch_size, lattice)      (see ner.libsonnet)
// and `models.spec(dataset, name)` below builds it from this file.
//
// No pretrained vectors are reachable here: the papers' word2vec character, bigram and word
// embeddings (Giga-word) are replaced by randomly initialised ones of the same sizes (50 each);
// point `*_pretrained_file` of the embedder at a .vec file to use some.
local ner = import 'ner.libsonnet';

{
  // Lexicon lattice of every lattice model: all jieba dict.txt words of 2..10 characters.
  lexicon:: { type: 'lexicon' },

  // Embedders --------------------------------------------------------------------------------
  char_bigram:: { type: 'char_bigram', char_dim: 50, bigram_dim: 50, dropout: 0.5 },
  // characters = proj([char 50; bigram 50]), words = proj(word 50), both to `d`
  lattice_embedder(d):: { type: 'lattice', output_dim: d, char_dim: 50, bigram_dim: 50, word_dim: 50, dropout: 0.5 },

  // Models -----------------------------------------------------------------------------------
  // Transformer baseline over characters (BiG paper Table IV ran it on BERT; here from scratch).
  transformer(dataset):: {
    type: 'tagger',
    embedder: $.char_bigram,
    encoder: { type: 'transformer', hidden_size: 128, num_layers: 2, num_heads: 4, dropout: 0.1,
               attention_dropout: 0.1, positions: 'sinusoidal' },
    head: { type: 'crf' },
  },

  // Star-Transformer baseline (Guo et al. 2019): satellites see i-1, i, i+1, e_i and the relay.
  star(dataset):: {
    type: 'tagger',
    embedder: $.char_bigram,
    encoder: { type: 'star_transformer', hidden_size: 128, num_layers: 2, num_heads: 4, dropout: 0.1,
               attention_dropout: 0.1 },
    head: { type: 'crf' },
  },

  // Lattice LSTM (Zhang & Yang 2018): embeddings 50 (char ⊕ bigram = 100), hidden 200 as
  // 100 per direction (released code: bidirectional), dropout 0.5, CRF.
  lattice_lstm(dataset):: {
    type: 'tagger',
    embedder: $.lattice_embedder(100),
    encoder: { type: 'lattice_lstm', hidden_size: 100, bidirectional: true, mode: 'batched', dropout: 0.5 },
    head: { type: 'crf' },
  },

  // PLTE (Xue et al. 2020, §5.1.3): hidden 128, 6 heads (6 x 22 = 132 inner: 128 is not a multiple
  // of 6), dropout 0.5 on embeddings and the GRU, 0.3 in the encoder; BiGRU-CRF decoder whose GRU
  // hidden is 200 on MSRA, 80 on Weibo, 100 otherwise. Layers and FFN size are not stated: 2, 512.
  // Ablations (Fig. 4b): encoder.lattice=false (-LASA), encoder.porous=false (-PM), both.
  gru_hidden:: { msra: 200, weibo: 80, resume: 100 },
  // a data set of your own (`ner.dataset(...)`) gets the "others" size and 30 epochs
  gru_size(dataset):: if std.isString(dataset) then $.gru_hidden[dataset] else 100,
  plte(dataset):: {
    type: 'tagger',
    embedder: $.lattice_embedder(128),
    encoder: { type: 'plte', hidden_size: 128, num_layers: 2, num_heads: 6, head_dim: 22, ffn_dim: 512,
               dropout: 0.3, lattice: true, porous: true, pivot: 'mean' },
    head: { type: 'bigru_crf', embedder_dim: 128, hidden_size: $.gru_size(dataset), dropout: 0.5 },
  },

  // BiG-Transformer (Shu et al. 2020): 8 heads for NER (Table I), CRF head; bipartite attention of
  // each character over the lexicon words containing it, itself and the sentence node. The paper
  // ran NER on BERT; here character + bigram embeddings, 2 layers of 128.
  // Ablations (Table VI): encoder.local='none' (w/o local), encoder.global_node=false (w/o global),
  // encoder.local='adjacent' (radical connections instead of words).
  big(dataset):: {
    type: 'tagger',
    embedder: $.char_bigram,
    encoder: { type: 'big', hidden_size: 128, num_layers: 2, num_heads: 8, dropout: 0.1, attention_dropout: 0.1,
               'local': 'lexicon', global_node: true, include_self: true },
    head: { type: 'crf' },
  },

  // BiG over a BiLSTM: the BiG paper's NER rows (Table IV) run the bipartite layers over BERT,
  // which is not reachable here. On bare character + bigram embeddings a character sees its
  // neighbours only through lexicon words (`big`); here the bilstm_crf baseline's BiLSTM gives
  // the BiG layers contextual character states, as BERT did. Compare with bilstm_crf (the same
  // model without the BiG layers), as the paper compares BiG with BERT.
  bilstm_big(dataset):: {
    type: 'tagger',
    embedder: $.char_bigram,
    encoder: { type: 'compose', encoders: [ner.bilstm_crf.encoder, $.big(dataset).encoder] },
    head: { type: 'crf' },
  },

  // Pretrained characters (the papers' [BERT] settings) on m3e-small, a 4-layer, 512-d Chinese
  // RoBERTa (the papers' BERT is 12 layers of 768), from the optional extra multigrain[m3e].
  // One id per character between [CLS] and [SEP] (special_tokens); sentences over 510 characters
  // are read in overlapping windows (models/tagger.py). pieces: 'wordpiece' would read the
  // tokenizer's own pieces instead (embedders/piece_alignment.py).
  m3e:: { type: 'hf_transformer', model_path: 'package:embedding/m3e-small', special_tokens: true },
  // lattice tokens over the backbone: its character states and the words' own embeddings, both to `d`
  m3e_lattice(d):: { type: 'backbone_lattice', backbone: $.m3e, output_dim: d, word_dim: 50, dropout: 0.1 },
  // (constrained: the most probable path of softmax scores that keeps the tag scheme's transitions)
  softmax_head:: { type: 'softmax_tagger', dropout: 0.1, constrained: true },
  // BERT-Tagger: the backbone + CRF (tagger_m3e) or + softmax (softmax_m3e)
  tagger_m3e(dataset):: { type: 'tagger', embedder: $.m3e, head: { type: 'crf' } },
  softmax_m3e(dataset):: { type: 'tagger', embedder: $.m3e, head: $.softmax_head },
  // PLTE[BERT] (PLTE paper §5.2: "replace character embeddings with the pre-trained BERT
  // representations, and use softmax layer to make sequence tagging"): the backbone's character
  // states (dropout 0.1, BERT's) projected to PLTE's 128 and the lexicon words' own embeddings as
  // lattice tokens; PLTE's encoder as above; a softmax head.
  plte_m3e(dataset):: $.plte(dataset) + {
    embedder: $.m3e_lattice(128),
    head: $.softmax_head,
  },
  // PLTE[m3e] at the backbone's width: the character states kept at m3e-small's 512 (no projection
  // to PLTE's 128), 8 heads of 64, FFN 2048 and dropout 0.1 in the encoder, as in a BERT layer. The
  // paper does not say how PLTE[BERT] meets BERT's 768 (benchmarks/RESULTS.md, "NER over
  // pretrained characters": the 128 bottleneck costs PLTE[m3e] on Weibo).
  plte_m3e_wide(dataset):: $.plte_m3e(dataset) + {
    embedder+: { output_dim: 512 },
    encoder+: { hidden_size: 512, num_heads: 8, head_dim: 64, ffn_dim: 2048, dropout: 0.1 },
  },
  // Lattice LSTM[BERT] (PLTE paper §5.2, its Tables 1-3): the Lattice LSTM over the backbone's
  // character states projected to its 100 (the char + bigram width it reads above) and the
  // lexicon words' own embeddings; its BiLSTM and dropout as above; a softmax head, as PLTE[m3e].
  lattice_lstm_m3e(dataset):: $.lattice_lstm(dataset) + {
    embedder: $.m3e_lattice(100),
    head: $.softmax_head,
  },
  // BiG-Transformer (BERT) (BiG paper Table IV): the bipartite layers over the backbone's states.
  big_m3e(dataset):: $.big(dataset) + { embedder: $.m3e, encoder+: { hidden_size: 256 } },

  // PLTE trained as the paper says (SGD), see trainers.plte_sgd
  plte_sgd(dataset):: $.plte(dataset),

  bilstm_crf(dataset):: ner.bilstm_crf,

  // Trainers ---------------------------------------------------------------------------------
  epochs:: { resume: 30, weibo: 30, msra: 10 },
  epochs_of(dataset):: if std.isString(dataset) then $.epochs[dataset] else 30,
  // SGD with lr_t = lr / (1 + 0.05 epoch) and L2 1e-8, gradients clipped at 5: the Lattice LSTM
  // code base PLTE builds on. PLTE's "weight decay of 0.05" is that code's lr_decay (an L2 of
  // 0.05 would erase embeddings trained from scratch); eq. 7's L2 weight is its HP_l2 = 1e-8.
  sgd(lr, epochs):: {
    num_epochs: epochs,
    optimizer: { type: 'sgd', lr: lr, weight_decay: 1e-8 },
    scheduler: { type: 'inverse_time', decay: 0.05 },
    grad_clipping: 5.0,
    patience: 10,
    validation_metric: '+f1',
  },
  trainers:: {
    // Adam for the models the papers trained on BERT (no SGD setting to copy)
    bilstm_crf(d):: ner.trainer(epochs=$.epochs_of(d), lr=2e-3),
    transformer(d):: ner.trainer(epochs=$.epochs_of(d), lr=1e-3),
    star(d):: ner.trainer(epochs=$.epochs_of(d), lr=1e-3),
    big(d):: ner.trainer(epochs=$.epochs_of(d), lr=1e-3),
    bilstm_big(d):: ner.trainer(epochs=$.epochs_of(d), lr=1e-3),
    // PLTE: Adam, warmed up over 5% of the steps, then decayed linearly to 0 (the paper's SGD
    // rate decays too), patience 8. The paper's SGD (lr 0.045, decay 0.05, §5.1.3) is the spec
    // <dataset>_plte_sgd; it needs word2vec vectors to move at all (benchmarks/RESULTS.md,
    // "Trainer choices").
    plte(d):: ner.trainer(epochs=$.epochs_of(d), lr=1e-3) +
              { scheduler: { type: 'linear_warmup', warmup_fraction: 0.05 }, patience: 8 },
    plte_sgd(d):: $.sgd(0.045, $.epochs_of(d)),
    // Lattice LSTM: SGD lr 0.015 at batch size 1 (per-sentence loss); our loss is the batch mean,
    // so with batches of 8 the rate is scaled linearly to 0.12 (benchmarks/RESULTS.md, "Trainer choices")
    lattice_lstm(d):: $.sgd(0.12, $.epochs_of(d)),
    // BERT fine-tuning (the defaults of every m3e spec): AdamW, the backbone at 1e-4 (UER's rate
    // for this size) and the new layers (CRF, PLTE, BiG) at 1e-3, linear warm-up over 10% of the
    // steps then linear decay to 0, gradients clipped at 1.
    tagger_m3e(d):: $.finetune($.m3e_epochs_of(d)),
    softmax_m3e(d):: $.finetune($.m3e_epochs_of(d)),
    plte_m3e(d):: $.finetune($.m3e_epochs_of(d)),
    plte_m3e_wide(d):: $.finetune($.m3e_epochs_of(d)),
    big_m3e(d):: $.finetune($.m3e_epochs_of(d)),
    lattice_lstm_m3e(d):: $.finetune($.m3e_epochs_of(d)),
  },
  m3e_epochs:: { resume: 3, weibo: 5, msra: 2 },
  m3e_epochs_of(dataset):: if std.isString(dataset) then $.m3e_epochs[dataset] else 3,
  backbone_regex:: '^embedder\\.(backbone\\.)?model\\.',
  finetune(epochs, lr=1e-3, backbone_lr=1e-4):: {
    num_epochs: epochs,
    optimizer: { type: 'adamw', lr: lr, weight_decay: 0.01,
                 parameter_groups: [[[$.backbone_regex], { lr: backbone_lr }]] },
    scheduler: { type: 'linear_warmup', warmup_fraction: 0.1 },
    grad_clipping: 1.0,
    patience: 3,
    validation_metric: '+f1',
  },
  batch_size:: { tagger_m3e: 16, softmax_m3e: 16, plte_m3e: 16, plte_m3e_wide: 16, big_m3e: 16, lattice_lstm_m3e: 16,
                 bilstm_crf: 32, transformer: 32, star: 32, big: 16, bilstm_big: 16, plte: 16, plte_sgd: 16, lattice_lstm: 8 },
  lattice_models:: ['lattice_lstm', 'plte', 'plte_sgd', 'big', 'bilstm_big', 'plte_m3e', 'plte_m3e_wide', 'big_m3e',
                    'lattice_lstm_m3e'],

  // Pretrained vectors: `<model>_vec` is `<model>` whose embeddings start from the char, bigram
  // and word vectors in the directory given by the ext var `vectors` (chars.vec, bigrams.vec,
  // words.vec: benchmarks/pretrain_vectors.py trains them on the shared training text, as no
  // Giga-word vectors are reachable here). Tokens of any split with a vector join the vocabulary.
  vector_models:: ['bilstm_crf', 'lattice_lstm', 'plte', 'plte_sgd', 'big', 'bilstm_big'],
  vector_files(dir):: { chars: dir + '/chars.vec', bigrams: dir + '/bigrams.vec', words: dir + '/words.vec' },
  with_vectors(model, dir)::
    local f = $.vector_files(dir);
    model + { embedder+: { char_pretrained_file: f.chars, bigram_pretrained_file: f.bigrams } +
                         (if model.embedder.type == 'lattice' then { word_pretrained_file: f.words } else {}) },

  // spec(dataset, 'plte_vec', vectors_dir) = spec(dataset, 'plte') with pretrained vectors
  vec_spec(dataset, name, dir)::
    local base = $.spec(dataset, name);
    local namespaces = if base.model.embedder.type == 'lattice' then ['chars', 'bigrams', 'words']
                       else ['chars', 'bigrams'];
    base + {
      model: $.with_vectors(base.model, dir),
      vocabulary+: { pretrained_files: { [ns]: $.vector_files(dir)[ns] for ns in namespaces } },
    },

  // The whole spec of `name` on `dataset` (a name, or a `ner.dataset(...)` of your own). MSRA has sentences of up to ~1,500 characters: its
  // training batches are capped at 6,000 characters and evaluation batches at 8 sentences.
  spec(dataset, name)::
    local s = ner.spec(dataset, $[name](dataset), trainer=$.trainers[name](dataset), batch_size=$.batch_size[name],
                       lattice=if std.member($.lattice_models, name) then $.lexicon else null);
    s + (if dataset == 'msra' then { data_loader+: { max_tokens: 6000, eval_batch_size: 8 } } else {}),
}
