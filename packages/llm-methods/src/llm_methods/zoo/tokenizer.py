"""Byte-level BPE tokenizers trained here (``tokenizers``) and wrapped for transformers."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "train_bpe"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|pad|>", "<|user|>", "<|assistant|>")
CHAT_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'user' %}<|user|>{{ m['content'] }}\n"
    "{% elif m['role'] == 'assistant' %}<|assistant|>{{ m['content'] }}<|endoftext|>\n"
    "{% else %}{{ m['content'] }}\n{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def train_bpe(texts: Iterable[str], vocab_size: int):  # -> PreTrainedTokenizerFast
    """A byte-level BPE tokenizer (any text encodes) of ``vocab_size`` tokens, deterministic for
    the same texts; BOS = EOS = ``<|endoftext|>``, pad ``<|pad|>``, a minimal chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(texts, trainer=trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=SPECIAL_TOKENS[0],
        eos_token=SPECIAL_TOKENS[0],
        pad_token=SPECIAL_TOKENS[1],
    )
    tok.chat_template = CHAT_TEMPLATE
    return tok
