"""What a row runs, per peer (measure.Row): the twin's eager model on the gguf package's
dequantized weights, or transformers' own model from the same file. The tests are the
same for both (measure.py); how each peer answers, runs a pp test and a tg test is its
own: the twin calls its forward pass, transformers its model's forward and `generate()`,
as a user would."""

from __future__ import annotations

from generate import hf, parts, twin
from generate.formulas import float_bytes, weight_bytes_per_token
from generate.measure import Row


def pp_ids(prompt: list[int], n: int) -> list[int]:
    """The ids of a pp test: the prompt's, repeated to n (measure.rs pp_ids)."""
    return (prompt * (n // len(prompt) + 1))[:n]


def twin_row(torch, cfg, weights: dict, dtype, device) -> Row:
    d = cfg.dims
    positions = max(cfg.pp_tokens, len(cfg.prompt_ids) + cfg.tg_tokens)
    m = twin.Twin(torch, d, weights, dtype, device, positions)
    pp_in = pp_ids(cfg.prompt_ids, cfg.pp_tokens)

    def tg():
        t = cfg.start
        for pos in range(cfg.tg_tokens):
            t = int(m.forward([t], pos).argmax())
        return t

    elem = torch.empty((), dtype=dtype).element_size()
    return Row(
        answer=lambda: twin.greedy(m, cfg.prompt_ids, cfg.tg_tokens, cfg.eos),
        ttft=lambda: int(m.forward(cfg.prompt_ids, 0).argmax()),
        pp=lambda: m.forward(pp_in, 0),
        tg=tg,
        mats=m,
        weight_bytes=m.weight_bytes(),
        weight_bytes_per_token=float_bytes(d, elem)[1],
        parts=lambda clock, plan, shapes, mm_tg: parts.token_parts(
            torch, clock, plan, m, d, shapes, mm_tg
        ),
    )


class HfMats:
    """transformers' own nn.Linear modules of the model, called alone: a layer's
    q/k/v/o_proj and gate/up/down_proj, and lm_head."""

    NAMES = [
        ("self_attn", "q_proj"),
        ("self_attn", "k_proj"),
        ("self_attn", "v_proj"),
        ("self_attn", "o_proj"),
        ("mlp", "gate_proj"),
        ("mlp", "up_proj"),
        ("mlp", "down_proj"),
    ]

    def __init__(self, model):
        layers = model.model.layers
        self.layers_count = len(layers)
        self.mods = [[getattr(getattr(layer, a), b) for a, b in self.NAMES] for layer in layers]
        self.head = model.lm_head

    def project(self, layer: int, which: int, x):
        return self.mods[layer][which](x)

    def logits(self, x):
        return self.head(x)


def hf_row(torch, cfg, path: str, dtype, device) -> Row:
    model = hf.load_model(path, torch, dtype, device)
    d = cfg.dims
    prompt = torch.tensor([cfg.prompt_ids], device=device)
    pp_in = torch.tensor([pp_ids(cfg.prompt_ids, cfg.pp_tokens)], device=device)
    start = torch.tensor([[cfg.start]], device=device)
    n = cfg.tg_tokens
    # Its own weights, the tied head counted once (parameters() yields a shared one once).
    held = sum(p.numel() * p.element_size() for p in model.parameters())
    elem = torch.empty((), dtype=dtype).element_size()
    matmul_bytes = d.token_matmul_params() * elem
    return Row(
        answer=lambda: hf.greedy(model, torch, cfg.prompt_ids, n),
        ttft=lambda: int(model(prompt, logits_to_keep=1).logits[0, -1].argmax()),
        pp=lambda: model(pp_in, logits_to_keep=1),
        # generate() from one token: n forward passes of one token from an empty cache,
        # each next token its greedy pick; min_new_tokens keeps it from ending at an EOS.
        tg=lambda: hf.generate(model, start, n, n),
        mats=HfMats(model),
        weight_bytes=held,
        weight_bytes_per_token=weight_bytes_per_token(d, matmul_bytes, elem, elem),
        parts=None,
    )
