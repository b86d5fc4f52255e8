"""The PyTorch eager twin of bench_gpt_step.cpp: the same GPT (src/workloads/llm_training/gpt.cpp),
the same per-token cross-entropy, AdamW with weight decay on matrices only, global-norm clipping,
timed the same way and printing the same `result` line. Run it with Debian's interpreter
(/usr/bin/python3 + python3-torch); bench/bench_gpt_step.sh alternates it with the C++ bench.
Parameters are created in the C++ model's order with the same draws, so from the same seed both
start from the same weights and tokens (compare loss0). One process, no tensor parallelism.
Legend: B batch, S sequence, h hidden, a heads, d head size, F FFN hidden, V padded vocabulary.
"""
import argparse
import math
import resource
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def rotary(x, base=10000.0):
    """Megatron's RoPE on (B, a, S, d): rotate_half over the two halves of d."""
    s, d = x.shape[-2], x.shape[-1]
    inv_freq = 1.0 / torch.pow(base, torch.arange(0, d, 2, dtype=torch.float32) / d)
    angles = torch.outer(torch.arange(s, dtype=torch.float32), inv_freq)
    emb = torch.cat([angles, angles], -1)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * emb.cos().to(x.dtype) + torch.cat([-x2, x1], -1) * emb.sin().to(x.dtype)


def causal_attention(q, k, v):
    s = q.shape[-2]
    future = torch.ones(s, s, dtype=torch.bool).triu(1)
    scores = torch.matmul(q, k.transpose(-2, -1)).mul_(1.0 / math.sqrt(q.shape[-1]))
    probs = torch.softmax(scores.masked_fill_(future, float("-inf")), -1, dtype=torch.float32).to(v.dtype)
    return torch.matmul(probs, v)


class Block(nn.Module):
    def __init__(self, h, a, f, layers, std, rope):
        super().__init__()
        out_std = std / math.sqrt(2.0 * layers)
        self.a, self.rope = a, rope
        self.input_layernorm = nn.LayerNorm(h, eps=1e-5)
        self.qkv_weight = nn.Parameter(torch.empty(3 * h, h).normal_(0.0, std))  # per head [q; k; v]
        self.qkv_bias = nn.Parameter(torch.zeros(3 * h))
        self.dense_weight = nn.Parameter(torch.empty(h, h).normal_(0.0, out_std))
        self.dense_bias = nn.Parameter(torch.zeros(h))
        self.post_attention_layernorm = nn.LayerNorm(h, eps=1e-5)
        self.fc1_weight = nn.Parameter(torch.empty(f, h).normal_(0.0, std))
        self.fc1_bias = nn.Parameter(torch.zeros(f))
        self.fc2_weight = nn.Parameter(torch.empty(h, f).normal_(0.0, out_std))
        self.fc2_bias = nn.Parameter(torch.zeros(h))

    def attention(self, x):
        b, s, h = x.shape
        d = h // self.a
        qkv = F.linear(x, self.qkv_weight, self.qkv_bias).view(b, s, self.a, 3, d).permute(3, 0, 2, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        if self.rope:
            q, k = rotary(q), rotary(k)
        ctx = causal_attention(q, k, v).transpose(1, 2).reshape(b, s, h)
        return F.linear(ctx, self.dense_weight) + self.dense_bias

    def mlp(self, x):
        up = F.gelu(F.linear(x, self.fc1_weight, self.fc1_bias), approximate="tanh")
        return F.linear(up, self.fc2_weight) + self.fc2_bias

    def forward(self, x):
        h = x + self.attention(self.input_layernorm(x))
        return h + self.mlp(self.post_attention_layernorm(h))


class Gpt(nn.Module):
    def __init__(self, layers, h, a, f, s, v, std, rope):
        super().__init__()
        self.word_embeddings = nn.Parameter(torch.empty(v, h).normal_(0.0, std))
        self.position_embeddings = None if rope else nn.Parameter(torch.empty(s, h).normal_(0.0, std))
        self.layers = nn.ModuleList([Block(h, a, f, layers, std, rope) for _ in range(layers)])
        self.final_layernorm = nn.LayerNorm(h, eps=1e-5)

    def forward(self, tokens):
        x = F.embedding(tokens, self.word_embeddings)
        if self.position_embeddings is not None:
            x = x + self.position_embeddings[: tokens.shape[1]]
        for block in self.layers:
            x = block(x)
        return F.linear(self.final_layernorm(x), self.word_embeddings)  # tied output layer


def main():
    p = argparse.ArgumentParser(description=__doc__)
    for name, default in [("layers", 4), ("hidden", 256), ("heads", 8), ("ffn", 0), ("seq", 256), ("vocab", 50304),
                          ("batch", 4), ("warmup", 2), ("steps", 5), ("threads", 0), ("seed", 0)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    p.add_argument("--positions", choices=["learned", "rope"], default="learned")
    args, _ = p.parse_known_args()  # the C++ bench's other flags are ignored
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    ffn = args.ffn or 4 * args.hidden
    torch.manual_seed(args.seed)
    model = Gpt(args.layers, args.hidden, args.heads, ffn, args.seq, args.vocab, 0.02, args.positions == "rope")
    tokens = torch.randint(args.vocab, (args.batch, args.seq + 1))
    decay = [q for q in model.parameters() if q.dim() >= 2]
    no_decay = [q for q in model.parameters() if q.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.999), eps=1e-8)
    inputs, labels = tokens[:, :-1], tokens[:, 1:]
    weights_sum = sum(q.detach().abs().sum().item() for q in model.parameters())
    tokens_sum = int(tokens.sum())

    phases, steps = [], []
    loss0 = None
    for i in range(args.warmup + args.steps):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16"):
            logits = model(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, args.vocab), labels.reshape(-1))
        t1 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        value = loss.item()
        t3 = time.perf_counter()
        if loss0 is None:
            loss0 = value
        if i >= args.warmup:
            phases.append((t1 - t0, t2 - t1, t3 - t2))
            steps.append(t3 - t0)
    step = statistics.median(steps)
    med = [statistics.median(x[j] for x in phases) * 1e3 for j in range(3)]
    params = sum(q.numel() for q in model.parameters())
    threads = torch.get_num_threads()
    print(f"gpt_step.py (PyTorch {torch.__version__}): step median {step * 1e3:.1f} ms, "
          f"{args.batch * args.seq / step:.1f} tokens/s, {params} parameters, first-step loss {loss0:.6f}")
    print(f"result impl=py layers={args.layers} hidden={args.hidden} heads={args.heads} seq={args.seq} "
          f"vocab={args.vocab} batch={args.batch} dtype={args.precision} threads={threads} tp=1 params={params} "
          f"step_ms={step * 1e3:.2f} step_ms_min={min(steps) * 1e3:.2f} tokens_per_s={args.batch * args.seq / step:.1f} "
          f"loss0={loss0:.6f} forward_ms={med[0]:.2f} backward_ms={med[1]:.2f} optimizer_ms={med[2]:.2f} "
          f"weights_sum={weights_sum:.4f} tokens_sum={tokens_sum} "
          f"peak_rss_mib={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}")


if __name__ == "__main__":
    main()
