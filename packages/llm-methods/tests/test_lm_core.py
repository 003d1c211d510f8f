from __future__ import annotations

import pytest
import torch

from llm_methods.lm import (
    LMError,
    add_lora,
    add_to_residual,
    capture_residual,
    capture_sublayers,
    chat_prompt,
    collate,
    continuation_logprobs,
    count_parameters,
    encode_texts,
    forward_hidden,
    generate,
    load_lm,
    logit_lens,
    perplexity,
    replace_residual,
    token_logprobs,
    top_tokens,
    train_only_layers,
    wrap,
)

TEXTS_SMALL = [
    "Lists hold items in order and can change.",
    "Dictionaries map keys to values quickly.",
    "Sets keep unique items without order.",
    "Strings are immutable sequences of characters.",
] * 4


def _ids(tiny, text="The quick brown fox jumps over the lazy dog."):  # type: ignore[no-untyped-def]
    return torch.tensor([encode_texts(tiny, [text])[0]])


def test_handle_finds_layers_norm_unembedding(tiny) -> None:  # type: ignore[no-untyped-def]
    assert tiny.n_layers == 2 and tiny.hidden_size == 64
    assert tiny.layer(-1) is tiny.layers[1]
    assert tiny.unembed.weight.shape == (len(tiny.tokenizer), 64)
    assert tiny.sublayer(0, "attn") is tiny.layers[0].self_attn
    assert tiny.sublayer(1, "ffn") is tiny.layers[1].mlp


@pytest.mark.parametrize("bad", [2, -3, 1.0, "1", True])
def test_unknown_layer_is_a_clear_error(tiny, bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LMError, match="unknown layer"):
        tiny.layer(bad)
    with pytest.raises(LMError, match="unknown layer"):
        with capture_residual(tiny, [bad]):
            pass


def test_model_without_needed_modules_is_a_clear_error(tiny) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LMError, match="Linear has no decoder layers"):
        wrap(tiny.tokenizer, torch.nn.Linear(3, 3))
    with pytest.raises(LMError, match="unknown sub-layer"):
        tiny.sublayer(0, "conv")


def test_logit_lens_at_last_layer_equals_model_logits(tiny) -> None:  # type: ignore[no-untyped-def]
    ids = _ids(tiny)
    with torch.no_grad(), capture_residual(tiny, [-1]) as store:
        logits = tiny.model(input_ids=ids).logits
        lens = logit_lens(tiny, store[1])
    torch.testing.assert_close(lens, logits, rtol=0, atol=1e-5)
    assert len(top_tokens(tiny, store[1][0, -1], k=5)) == 5


def test_capture_matches_hf_hidden_states(tiny) -> None:  # type: ignore[no-untyped-def]
    batch = collate([_ids(tiny)[0].tolist()], tiny.tokenizer.pad_token_id)
    with torch.no_grad(), capture_residual(tiny) as store:
        _, hidden = forward_hidden(tiny, batch)
    torch.testing.assert_close(store[0], hidden[1])  # before the final norm except the last
    torch.testing.assert_close(tiny.final_norm(store[1]), hidden[2])


def test_add_to_residual_adds_exactly_the_vector(tiny) -> None:  # type: ignore[no-untyped-def]
    ids = _ids(tiny)
    vec = torch.randn(64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        with capture_residual(tiny, [0, 1]) as clean:
            tiny.model(input_ids=ids)
        clean = dict(clean)
        with add_to_residual(tiny, 0, vec, scale=2.0), capture_residual(tiny, [0, 1]) as steered:
            tiny.model(input_ids=ids)
    # hook order: the add hook runs first, the capture sees the sum
    torch.testing.assert_close(steered[0] - clean[0], (2.0 * vec).expand_as(clean[0]))
    assert not torch.allclose(steered[1], clean[1])  # it propagates to later layers
    with torch.no_grad(), capture_residual(tiny, [0]) as after:
        tiny.model(input_ids=ids)
    torch.testing.assert_close(after[0], clean[0])  # removed on exit


def test_add_to_residual_at_positions_only(tiny) -> None:  # type: ignore[no-untyped-def]
    ids = _ids(tiny)
    vec = torch.ones(64)
    with torch.no_grad():
        with capture_residual(tiny, [0]) as clean:
            tiny.model(input_ids=ids)
        clean = dict(clean)
        with add_to_residual(tiny, 0, vec, positions=[0, 2]), capture_residual(tiny, [0]) as s:
            tiny.model(input_ids=ids)
    diff = (s[0] - clean[0])[0].abs().sum(-1)
    assert diff[0] > 0 and diff[2] > 0 and diff[1] == 0 and diff[3:].sum() == 0
    with pytest.raises(LMError, match="last dimension 5"):
        with add_to_residual(tiny, 0, torch.ones(5)):
            pass


def test_replace_residual_and_sublayer_capture(tiny) -> None:  # type: ignore[no-untyped-def]
    ids = _ids(tiny)
    with torch.no_grad():
        with capture_sublayers(tiny, [1], "ffn") as ffn, capture_residual(tiny, [0, 1]) as res:
            tiny.model(input_ids=ids)
        assert ffn[1].shape == res[1].shape
        with replace_residual(tiny, 1, torch.zeros_like):
            logits = tiny.model(input_ids=ids).logits
    expected = tiny.unembed(tiny.final_norm(torch.zeros(1, 1, 64)))
    torch.testing.assert_close(logits[0, 0], expected[0, 0])


def test_padding_does_not_change_scores(tiny) -> None:  # type: ignore[no-untyped-def]
    texts = ["A list is a mutable sequence.", "The fox jumps over the lazy dog and the quick fox."]
    ids = encode_texts(tiny, texts)
    alone = [token_logprobs(tiny, [row])[0] for row in ids]
    batched = token_logprobs(tiny, ids, batch_size=2)
    for a, b in zip(alone, batched, strict=True):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
    ppl = perplexity(tiny, ids)
    torch.testing.assert_close(ppl[0], torch.exp(-alone[0].mean()))


def test_last_token_logits_equal_full_forward(tiny) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.lm import last_token_logits

    ids = [[1, 5, 9, 4, 7], [1, 3], [1, 8, 8]]
    got = last_token_logits(tiny, ids, batch_size=2)
    for row, want in zip(ids, got, strict=True):
        full = tiny.model(input_ids=torch.tensor([row])).logits[0, -1].float()
        assert torch.allclose(want, full, atol=1e-5)


def test_continuation_logprob_is_sum_of_its_tokens(tiny) -> None:  # type: ignore[no-untyped-def]
    prompt, cont = "The quick brown", " fox jumps"
    score = continuation_logprobs(tiny, [prompt, prompt], [cont, " dog"], batch_size=2)
    full = encode_texts(tiny, [prompt])[0]
    n_cont = len(tiny.tokenizer(cont, add_special_tokens=False).input_ids)
    row = full + tiny.tokenizer(cont, add_special_tokens=False).input_ids
    lp = token_logprobs(tiny, [row])[0]
    torch.testing.assert_close(score[0], lp[-n_cont:].sum(), rtol=0, atol=1e-5)
    mean = continuation_logprobs(tiny, [prompt], [cont], reduce="mean")
    torch.testing.assert_close(mean[0], score[0] / n_cont, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda lm: encode_texts(lm, ["ok", "  "]), "text 1 is empty"),
        (lambda lm: encode_texts(lm, "one string"), "one string"),
        (lambda lm: continuation_logprobs(lm, ["a"], [""]), "continuation 0 is empty"),
        (lambda lm: continuation_logprobs(lm, ["a", "b"], ["c"]), "2 prompts but 1"),
        (lambda lm: chat_prompt(lm, " "), "empty"),
    ],
)
def test_empty_text_is_a_clear_error(tiny, call, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LMError, match=match):
        call(tiny)


def test_chat_prompt_and_generation(tiny) -> None:  # type: ignore[no-untyped-def]
    prompt = chat_prompt(tiny, "Hello")
    assert prompt.endswith("<|assistant|>") and "Hello" in prompt
    out = generate(tiny, [prompt, "The quick"], max_new_tokens=4)
    again = generate(tiny, [prompt, "The quick"], max_new_tokens=4)
    assert out == again and len(out) == 2  # greedy is deterministic
    assert tiny.tokenizer.padding_side == "right"  # restored


def test_lora_trains_only_adapters(tiny) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.zoo.models import tiny_lm

    lm = tiny_lm(TEXTS_SMALL, vocab_size=280, seed=1)
    lora = add_lora(lm, r=2, layers=[1])
    names = [n for n, p in lora.model.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n and "layers.1." in n for n in names)
    assert lora.n_layers == 2 and lora.layer(1) is lora.layers[1]  # found through the wrapper
    trainable, total = count_parameters(lora.model)
    assert 0 < trainable < total / 10


def test_train_only_layers_leaves_others_bit_identical() -> None:
    from llm_methods.lm.train import train_lm
    from llm_methods.zoo.models import tiny_lm

    lm = tiny_lm(TEXTS_SMALL, vocab_size=280, seed=2)
    before = {n: p.detach().clone() for n, p in lm.model.named_parameters()}
    trainable, total = train_only_layers(lm, [-1])
    assert trainable == sum(p.numel() for p in lm.layers[1].parameters()) and trainable < total
    ids = encode_texts(lm, TEXTS_SMALL[:4])
    width = min(len(r) for r in ids)
    train_lm(lm.model, [r[:width] for r in ids], steps=3, batch_size=4, lr=1e-2)
    for name, param in lm.model.named_parameters():
        same = torch.equal(before[name], param.detach())
        assert same == ("layers.1." not in name), name


def test_load_lm_bad_specs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(LMError, match="unknown model spec 'nope'"):
        load_lm("nope")
    with pytest.raises(LMError, match=r"missing\.gguf: no such GGUF file"):
        load_lm(str(tmp_path / "missing.gguf"))
    with pytest.raises(LMError, match=r"no config\.json"):
        load_lm(str(tmp_path))
    with pytest.raises(LMError, match="unknown zoo model 'nope'"):
        load_lm("zoo:nope")
    with pytest.raises(LMError, match="unknown dtype"):
        from llm_methods.lm import resolve_dtype

        resolve_dtype("int3", torch.device("cpu"))


def test_saved_tiny_model_loads_back_identically(tiny, tmp_path) -> None:  # type: ignore[no-untyped-def]
    tiny.model.save_pretrained(tmp_path)
    tiny.tokenizer.save_pretrained(tmp_path)
    lm = load_lm(str(tmp_path), device="cpu")
    ids = _ids(tiny)
    with torch.no_grad():
        torch.testing.assert_close(lm.model(input_ids=ids).logits, tiny.model(input_ids=ids).logits)
    assert lm.dtype == torch.float32 and lm.device.type == "cpu"


def test_option_logprobs_equal_continuation_scores(tiny) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from llm_methods.lm import LMError, continuation_logprobs, option_logprobs

    got = option_logprobs(tiny, "A list is", [(" a", " mutable"), ("", " tuple is"), ("", " x")])
    want = continuation_logprobs(
        tiny,
        ["A list is a", "A list is", "A list is"],
        [" mutable", " tuple is", " x"],
        reduce="mean",
    )
    assert got == pytest.approx(want.tolist(), abs=1e-4)
    # the KV cache is cropped back after each option: the order of options does not matter
    again = option_logprobs(tiny, "A list is", [("", " x"), ("", " tuple is")])
    assert again == pytest.approx([got[2], got[1]], abs=1e-5)
    with pytest.raises(LMError, match="has no tokens"):
        option_logprobs(tiny, "A list is", [("", "")])


def test_kv_cache_reaches_a_forward_of_the_older_api(tiny) -> None:  # type: ignore[no-untyped-def]
    """transformers 5.x before the ``cache`` rename (5.17 on the GPU machine) takes
    ``past_key_values`` and swallows ``cache=`` in ``**kwargs``; option scoring and LTPO's cached
    reward must still continue from the KV cache there (they ran without it, silently)."""
    import copy
    import inspect

    import pytest

    from llm_methods.lm import continuation_logprobs, option_logprobs, wrap
    from llm_methods.lm.loading import cache_kwargs
    from llm_methods.ltpo.optimize import ThoughtScorer, prompt_ids

    base = type(tiny.model)
    real = "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"

    class OlderAPI(base):  # type: ignore[valid-type, misc]
        def forward(
            self,
            input_ids=None,
            attention_mask=None,
            position_ids=None,  # type: ignore[no-untyped-def]
            past_key_values=None,
            inputs_embeds=None,
            use_cache=None,
            **_swallowed,
        ):
            return super().forward(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                inputs_embeds=inputs_embeds,
                use_cache=use_cache,
                **{real: past_key_values},
            )

    model = copy.deepcopy(tiny.model)
    model.__class__ = OlderAPI
    older = wrap(tiny.tokenizer, model, "older")
    assert set(cache_kwargs(older.model, None)) == {"past_key_values"}
    got = option_logprobs(older, "A list is", [(" a", " mutable"), ("", " tuple is")])
    want = continuation_logprobs(
        tiny, ["A list is a", "A list is"], [" mutable", " tuple is"], reduce="mean"
    )
    assert got == pytest.approx(want.tolist(), abs=1e-4)
    scorer = ThoughtScorer(older, prompt_ids(older, "Tom has 3 apples. How many?"))
    thoughts = torch.randn(4, tiny.hidden_size, generator=torch.Generator().manual_seed(0)) * 0.1
    with torch.no_grad():
        assert abs(float(scorer.reward(thoughts) - scorer.reward_uncached(thoughts))) < 1e-4
