#!/usr/bin/env python3
"""Generates the shipped layer profiles in data/profiles/*.json (see docs/profiles.md).

Each model is written out layer by layer (conv / batch-norm / linear / layer-norm / embedding
shapes, tracking the spatial size), which gives every gradient tensor's fp32 bytes and every
layer's forward MACs. One profile entry is one gradient tensor, in the order of the network from
the input side (layers[0] = layer 1) to the output side, as PyTorch's autograd hands them to a
WFBP hook. The total forward and backward times come from the papers of docs/references.md (see
TIMINGS below); the backward total is apportioned to the entries in proportion to each entry's
backward FLOPs.

Usage: scripts/gen_profiles.py [--out data/profiles] [--check]
  --check  regenerate in memory and fail if the files on disk differ (for CI).
No third-party packages are needed (pure Python 3).
"""

import argparse
import json
import math
import os
import sys

FP32 = 4

# Backward cost per entry, in multiply-accumulate equivalents.
#  conv / linear: data gradient + weight gradient = 2 x forward MACs; the first layer of a
#    network needs no data gradient (its input is the image / token ids) = 1 x forward MACs.
#  batch-norm / layer-norm: ~8 FLOPs (4 MAC-equivalents) per output element for the backward
#    pass, split evenly between the weight and the bias tensor.
#  bias of a conv / linear: reduce over the output = 1 MAC-equivalent per output element.
#  embedding: a scatter-add of tokens x hidden elements.
# Operations without parameters (ReLU, pooling, concatenation, attention's QK^T and AV, softmax)
# are not booked to an entry; normalising to the measured backward total spreads them over all
# entries in proportion (see docs/profiles.md for why this is acceptable and where it is not).
NORM_MACS_PER_ELEMENT = 4.0


class Net:
    def __init__(self, name):
        self.name = name
        self.entries = []  # dicts: name, params, cost (backward MAC-equivalents)
        self.forward_macs = 0
        self.first_weight = True

    def add(self, name, params, cost):
        self.entries.append({"name": name, "params": int(params), "cost": float(cost)})

    def conv(self, name, cin, cout, k, h, w, stride=1, pad=0, bias=False):
        kh, kw = (k, k) if isinstance(k, int) else k
        sh, sw = (stride, stride) if isinstance(stride, int) else stride
        ph, pw = (pad, pad) if isinstance(pad, int) else pad
        ho = (h + 2 * ph - kh) // sh + 1
        wo = (w + 2 * pw - kw) // sw + 1
        macs = cout * ho * wo * cin * kh * kw
        self.forward_macs += macs
        factor = 1.0 if self.first_weight else 2.0
        self.first_weight = False
        self.add(name + ".weight", cout * cin * kh * kw, factor * macs)
        if bias:
            self.add(name + ".bias", cout, cout * ho * wo)
        return ho, wo

    def bn(self, name, c, h, w):
        cost = NORM_MACS_PER_ELEMENT * c * h * w / 2
        self.add(name + ".weight", c, cost)
        self.add(name + ".bias", c, cost)

    def linear(self, name, fin, fout, tokens=1, bias=True):
        macs = tokens * fin * fout
        self.forward_macs += macs
        factor = 1.0 if self.first_weight else 2.0
        self.first_weight = False
        self.add(name + ".weight", fin * fout, factor * macs)
        if bias:
            self.add(name + ".bias", fout, tokens * fout)

    def layer_norm(self, name, c, tokens):
        self.bn(name, c, tokens, 1)

    def params(self):
        return sum(e["params"] for e in self.entries)


def pool(h, k, s, pad=0, ceil=False):
    v = (h + 2 * pad - k) / s
    return (math.ceil(v) if ceil else math.floor(v)) + 1


# ---------------------------------------------------------------- ResNet (torchvision, v1.5)
def resnet(name, blocks, size=224):
    n = Net(name)
    h, w = n.conv("conv1", 3, 64, 7, size, size, 2, 3)
    n.bn("bn1", 64, h, w)
    h = w = pool(h, 3, 2, 1)
    inplanes = 64
    for li, (planes, count) in enumerate(zip([64, 128, 256, 512], blocks), start=1):
        for b in range(count):
            stride = 2 if (b == 0 and li > 1) else 1
            p = f"layer{li}.{b}"
            h1, w1 = n.conv(p + ".conv1", inplanes, planes, 1, h, w)
            n.bn(p + ".bn1", planes, h1, w1)
            h2, w2 = n.conv(p + ".conv2", planes, planes, 3, h1, w1, stride, 1)
            n.bn(p + ".bn2", planes, h2, w2)
            h3, w3 = n.conv(p + ".conv3", planes, planes * 4, 1, h2, w2)
            n.bn(p + ".bn3", planes * 4, h3, w3)
            if b == 0:
                n.conv(p + ".downsample.0", inplanes, planes * 4, 1, h, w, stride)
                n.bn(p + ".downsample.1", planes * 4, h3, w3)
            inplanes = planes * 4
            h, w = h3, w3
    n.linear("fc", 2048, 1000)
    return n


# ---------------------------------------------------------------- DenseNet (torchvision)
def densenet(name, growth, blocks, init, size=224, bn_size=4):
    n = Net(name)
    h, w = n.conv("features.conv0", 3, init, 7, size, size, 2, 3)
    n.bn("features.norm0", init, h, w)
    h = w = pool(h, 3, 2, 1)
    c = init
    for bi, count in enumerate(blocks, start=1):
        for li in range(1, count + 1):
            p = f"features.denseblock{bi}.denselayer{li}"
            n.bn(p + ".norm1", c, h, w)
            n.conv(p + ".conv1", c, bn_size * growth, 1, h, w)
            n.bn(p + ".norm2", bn_size * growth, h, w)
            n.conv(p + ".conv2", bn_size * growth, growth, 3, h, w, 1, 1)
            c += growth
        if bi != len(blocks):
            p = f"features.transition{bi}"
            n.bn(p + ".norm", c, h, w)
            n.conv(p + ".conv", c, c // 2, 1, h, w)
            c //= 2
            h, w = h // 2, w // 2
    n.bn("features.norm5", c, h, w)
    n.linear("classifier", c, 1000)
    return n


# ---------------------------------------------------------------- Inception-v4 (Szegedy 2017)
# Module and branch names as in Cadene's pretrainedmodels / timm (which MG-WFBP's code uses).
def inception_v4(size=224):
    n = Net("inceptionv4")

    def bc(name, cin, cout, k, h, w, stride=1, pad=0):
        ho, wo = n.conv(name + ".conv", cin, cout, k, h, w, stride, pad)
        n.bn(name + ".bn", cout, ho, wo)
        return ho, wo

    h, w = bc("features.0", 3, 32, 3, size, size, 2)
    h, w = bc("features.1", 32, 32, 3, h, w)
    h, w = bc("features.2", 32, 64, 3, h, w, 1, 1)
    # Mixed_3a: maxpool || conv s2
    h, w = bc("features.3.conv", 64, 96, 3, h, w, 2)
    # Mixed_4a
    p = "features.4"
    a = bc(p + ".branch0.0", 160, 64, 1, h, w)
    a = bc(p + ".branch0.1", 64, 96, 3, *a)
    b = bc(p + ".branch1.0", 160, 64, 1, h, w)
    b = bc(p + ".branch1.1", 64, 64, (1, 7), *b, 1, (0, 3))
    b = bc(p + ".branch1.2", 64, 64, (7, 1), *b, 1, (3, 0))
    h, w = bc(p + ".branch1.3", 64, 96, 3, *b)
    # Mixed_5a: conv s2 || maxpool
    h, w = bc("features.5.conv", 192, 192, 3, h, w, 2)
    idx = 6
    for _ in range(4):  # Inception_A, 384 channels
        p = f"features.{idx}"
        bc(p + ".branch0", 384, 96, 1, h, w)
        bc(p + ".branch1.0", 384, 64, 1, h, w)
        bc(p + ".branch1.1", 64, 96, 3, h, w, 1, 1)
        bc(p + ".branch2.0", 384, 64, 1, h, w)
        bc(p + ".branch2.1", 64, 96, 3, h, w, 1, 1)
        bc(p + ".branch2.2", 96, 96, 3, h, w, 1, 1)
        bc(p + ".branch3.1", 384, 96, 1, h, w)
        idx += 1
    p = f"features.{idx}"  # Reduction_A -> 1024
    ho, wo = bc(p + ".branch0", 384, 384, 3, h, w, 2)
    bc(p + ".branch1.0", 384, 192, 1, h, w)
    bc(p + ".branch1.1", 192, 224, 3, h, w, 1, 1)
    bc(p + ".branch1.2", 224, 256, 3, h, w, 2)
    h, w = ho, wo
    idx += 1
    for _ in range(7):  # Inception_B, 1024 channels
        p = f"features.{idx}"
        bc(p + ".branch0", 1024, 384, 1, h, w)
        bc(p + ".branch1.0", 1024, 192, 1, h, w)
        bc(p + ".branch1.1", 192, 224, (1, 7), h, w, 1, (0, 3))
        bc(p + ".branch1.2", 224, 256, (7, 1), h, w, 1, (3, 0))
        bc(p + ".branch2.0", 1024, 192, 1, h, w)
        bc(p + ".branch2.1", 192, 192, (7, 1), h, w, 1, (3, 0))
        bc(p + ".branch2.2", 192, 224, (1, 7), h, w, 1, (0, 3))
        bc(p + ".branch2.3", 224, 224, (7, 1), h, w, 1, (3, 0))
        bc(p + ".branch2.4", 224, 256, (1, 7), h, w, 1, (0, 3))
        bc(p + ".branch3.1", 1024, 128, 1, h, w)
        idx += 1
    p = f"features.{idx}"  # Reduction_B -> 1536
    bc(p + ".branch0.0", 1024, 192, 1, h, w)
    ho, wo = bc(p + ".branch0.1", 192, 192, 3, h, w, 2)
    bc(p + ".branch1.0", 1024, 256, 1, h, w)
    bc(p + ".branch1.1", 256, 256, (1, 7), h, w, 1, (0, 3))
    bc(p + ".branch1.2", 256, 320, (7, 1), h, w, 1, (3, 0))
    bc(p + ".branch1.3", 320, 320, 3, h, w, 2)
    h, w = ho, wo
    idx += 1
    for _ in range(3):  # Inception_C, 1536 channels
        p = f"features.{idx}"
        bc(p + ".branch0", 1536, 256, 1, h, w)
        bc(p + ".branch1_0", 1536, 384, 1, h, w)
        bc(p + ".branch1_1a", 384, 256, (1, 3), h, w, 1, (0, 1))
        bc(p + ".branch1_1b", 384, 256, (3, 1), h, w, 1, (1, 0))
        bc(p + ".branch2_0", 1536, 384, 1, h, w)
        bc(p + ".branch2_1", 384, 448, (3, 1), h, w, 1, (1, 0))
        bc(p + ".branch2_2", 448, 512, (1, 3), h, w, 1, (0, 1))
        bc(p + ".branch2_3a", 512, 256, (1, 3), h, w, 1, (0, 1))
        bc(p + ".branch2_3b", 512, 256, (3, 1), h, w, 1, (1, 0))
        bc(p + ".branch3.1", 1536, 256, 1, h, w)
        idx += 1
    n.linear("last_linear", 1536, 1000)
    return n


# ---------------------------------------------------------------- GoogLeNet (torchvision)
def googlenet(size=224, aux=True):
    n = Net("googlenet")

    def bc(name, cin, cout, k, h, w, stride=1, pad=0):
        ho, wo = n.conv(name + ".conv", cin, cout, k, h, w, stride, pad)
        n.bn(name + ".bn", cout, ho, wo)
        return ho, wo

    def inception(name, cin, c1, c3r, c3, c5r, c5, pp, h, w):
        bc(name + ".branch1", cin, c1, 1, h, w)
        bc(name + ".branch2.0", cin, c3r, 1, h, w)
        bc(name + ".branch2.1", c3r, c3, 3, h, w, 1, 1)
        bc(name + ".branch3.0", cin, c5r, 1, h, w)
        # torchvision uses a 3x3 kernel here (a long-standing deviation from the paper's 5x5,
        # kept for weight compatibility); we follow torchvision, which MG-WFBP's code uses.
        bc(name + ".branch3.1", c5r, c5, 3, h, w, 1, 1)
        bc(name + ".branch4.1", cin, pp, 1, h, w)
        return c1 + c3 + c5 + pp

    def aux_head(name, cin):
        bc(name + ".conv", cin, 128, 1, 4, 4)  # after adaptive average pooling to 4x4
        n.linear(name + ".fc1", 2048, 1024)
        n.linear(name + ".fc2", 1024, 1000)

    h, w = bc("conv1", 3, 64, 7, size, size, 2, 3)
    h = w = pool(h, 3, 2, ceil=True)
    h, w = bc("conv2", 64, 64, 1, h, w)
    h, w = bc("conv3", 64, 192, 3, h, w, 1, 1)
    h = w = pool(h, 3, 2, ceil=True)
    c = inception("inception3a", 192, 64, 96, 128, 16, 32, 32, h, w)
    c = inception("inception3b", c, 128, 128, 192, 32, 96, 64, h, w)
    h = w = pool(h, 3, 2, ceil=True)
    c = inception("inception4a", c, 192, 96, 208, 16, 48, 64, h, w)
    if aux:
        aux_head("aux1", c)
    c = inception("inception4b", c, 160, 112, 224, 24, 64, 64, h, w)
    c = inception("inception4c", c, 128, 128, 256, 24, 64, 64, h, w)
    c = inception("inception4d", c, 112, 144, 288, 32, 64, 64, h, w)
    if aux:
        aux_head("aux2", c)
    c = inception("inception4e", c, 256, 160, 320, 32, 128, 128, h, w)
    h = w = pool(h, 2, 2, ceil=True)
    c = inception("inception5a", c, 256, 160, 320, 32, 128, 128, h, w)
    c = inception("inception5b", c, 384, 192, 384, 48, 128, 128, h, w)
    n.linear("fc", c, 1000)
    return n


# ---------------------------------------------------------------- BERT-Base (pre-training heads)
def bert_base(seq=64, batch=64, vocab=30522, hidden=768, layers=12, inter=3072, max_pos=512):
    n = Net("bert_base")
    tokens = seq * batch
    p = "bert.embeddings"
    # Embedding backward is a scatter-add of tokens x hidden elements; no data gradient.
    n.add(p + ".word_embeddings.weight", vocab * hidden, tokens * hidden)
    n.add(p + ".position_embeddings.weight", max_pos * hidden, tokens * hidden)
    n.add(p + ".token_type_embeddings.weight", 2 * hidden, tokens * hidden)
    n.layer_norm(p + ".LayerNorm", hidden, tokens)
    n.first_weight = False  # the encoder's inputs are activations: data gradients are needed
    heads = 12
    for li in range(layers):
        p = f"bert.encoder.layer.{li}"
        for m in ("query", "key", "value"):
            n.linear(f"{p}.attention.self.{m}", hidden, hidden, tokens)
        # QK^T and AV have no parameters; their forward MACs count for the totals.
        n.forward_macs += 2 * batch * heads * seq * seq * (hidden // heads)
        n.linear(p + ".attention.output.dense", hidden, hidden, tokens)
        n.layer_norm(p + ".attention.output.LayerNorm", hidden, tokens)
        n.linear(p + ".intermediate.dense", hidden, inter, tokens)
        n.linear(p + ".output.dense", inter, hidden, tokens)
        n.layer_norm(p + ".output.LayerNorm", hidden, tokens)
    n.linear("bert.pooler.dense", hidden, hidden, batch)
    n.linear("cls.predictions.transform.dense", hidden, hidden, tokens)
    n.layer_norm("cls.predictions.transform.LayerNorm", hidden, tokens)
    # The decoder's weight is tied to the word embeddings (its gradient accumulates there and is
    # ready only when the embedding's backward is done); its bias is the decoder's own tensor, so
    # the decoder matmul's backward cost (data + weight gradient) is booked to the bias entry.
    dec = tokens * hidden * vocab
    n.forward_macs += dec
    n.add("cls.predictions.bias", vocab, 2.0 * dec + tokens * vocab)
    n.linear("cls.seq_relationship", hidden, 2, batch)
    n.forward_macs //= batch  # per sample (one sequence), like the CNNs' per-image MACs
    return n


# ---------------------------------------------------------------- timings
# Totals on an RTX 2080 Ti (the [ASC-WFBP] Sec. VI-A testbed). Seconds per iteration at the given batch.
# tf_plus_tb from [ASC-WFBP] Table V (S) and Table IV (ASC-WFBP time): S = 32 (t_f + t_b) / T_ASC.
# t_b from Eq. 42 with S^max (Table V) and t_c^min = 2 m 32 / 9.43e9 (Eq. 43, m = Table III
# parameter count) where t_b < t_c^min, i.e. S^max = P (t_f+t_b) / (t_f+t_b+t_c^min-t_b).
def from_table_v(s, t_asc, s_max, m_params, p=32):
    total = s * t_asc / p
    tc_min = 2 * m_params * 32 / 9.43e9
    t_b = tc_min - (p * total / s_max - total)
    return total - t_b, t_b


def timings(macs224):
    t = {}
    # ResNet-152: [ASC-WFBP] Sec. VI-E gives t_f = 0.091 s and t_b = 0.182 s (batch 32).
    t["resnet152"] = (0.091, 0.182, "seed 000 Sec. VI-E (stated)")
    tf, tb = from_table_v(16.1, 0.377, 17.2, 42e6)
    t["inceptionv4"] = (tf, tb, "seed 000 Tables IV, V and Eq. 42-43 (derived)")
    tf, tb = from_table_v(10.6, 0.924, 11.5, 110e6)
    t["bert_base"] = (tf, tb, "seed 000 Tables IV, V and Eq. 42-43 (derived)")
    # DenseNet-201: S^max = 32 says t_b >= t_c^min, so Eq. 42 does not identify the split; use
    # ResNet-152's measured t_b / t_f = 2.
    total = 22.3 * 0.314 / 32
    t["densenet201"] = (total / 3, 2 * total / 3,
                        "seed 000 Table IV, V (derived total; t_b = 2 t_f as ResNet-152)")
    # No paper gives these: scale a same-family model measured on the same GPU by forward MACs.
    for name, ref in (("resnet50", "resnet152"), ("densenet161", "densenet201"),
                      ("googlenet", "inceptionv4")):
        r = macs224[name] / macs224[ref]
        t[name] = (t[ref][0] * r, t[ref][1] * r,
                   f"scaled from {ref} by forward MACs ({r:.3f}); no seed reports it")
    return t


MODELS = {
    "resnet50": lambda: resnet("resnet50", [3, 4, 6, 3]),
    "resnet152": lambda: resnet("resnet152", [3, 8, 36, 3]),
    "densenet161": lambda: densenet("densenet161", 48, [6, 12, 36, 24], 96),
    "densenet201": lambda: densenet("densenet201", 32, [6, 12, 48, 32], 64),
    "inceptionv4": lambda: inception_v4(),
    "googlenet": lambda: googlenet(),
    "bert_base": lambda: bert_base(),
}

BATCH = {"bert_base": "64 sequences of 64 tokens"}

# What the papers say (tensor count, parameters) and the exact architecture numbers we check.
SEED = {
    "googlenet": (59, "~13M", "seed 002 Table IV"),
    "resnet50": (161, "~25.5M", "seed 002 Table IV"),
    "resnet152": (467, "~60.1M", "seed 002 Table IV; seed 000 Table III"),
    "densenet161": (484, "~28.6M", "seed 002 Table IV"),
    "densenet201": (604, "~20M", "seed 002 Table IV; seed 000 Table III"),
    "inceptionv4": (449, "~42.6M", "seed 002 Table IV; seed 000 Table III"),
    "bert_base": (206, "~110M", "seed 000 Table III"),
}


def build_profiles():
    nets = {k: f() for k, f in MODELS.items()}
    macs = {k: n.forward_macs for k, n in nets.items()}
    t = timings(macs)
    out = {}
    for key, n in nets.items():
        tf, tb, src = t[key]
        total_cost = sum(e["cost"] for e in n.entries)
        layers = []
        acc = 0.0
        for e in n.entries:
            bt = tb * e["cost"] / total_cost
            acc += bt
            layers.append({"name": e["name"], "bytes": e["params"] * FP32, "backward_s": bt})
        out[key] = {
            "name": key,
            "forward_s": tf,
            "backward_s": tb,
            "batch": BATCH.get(key, "32 images of 3x224x224"),
            "device": "NVIDIA RTX 2080 Ti (seed 000 testbed)",
            "timing_source": src,
            "parameters": n.params(),
            "forward_macs": n.forward_macs,
            "layers": layers,
        }
    return out


def summary(profiles):
    rows = []
    for key, p in profiles.items():
        seed_t, seed_p, where = SEED[key]
        rows.append(f"| {key} | {len(p['layers'])} | {seed_t} | {p['parameters']:,} | {seed_p} "
                    f"| {p['forward_macs'] / 1e9:.2f} | {p['forward_s']:.4f} | "
                    f"{p['backward_s']:.4f} | {where} |")
    return "\n".join(rows)


def dump(p):
    """One key per line and one layer per line: small diffs, easy to read."""
    head = {k: v for k, v in p.items() if k != "layers"}
    lines = ["{"] + [f" {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    lines.append(' "layers": [')
    body = [f"  {json.dumps(layer)}" for layer in p["layers"]]
    lines.append(",\n".join(body))
    lines += [" ]", "}"]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "data", "profiles"))
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--summary", action="store_true", help="print the markdown table of docs")
    args = ap.parse_args()
    profiles = build_profiles()
    if args.summary:
        print(summary(profiles))
        n = inception_v4(size=299)
        print(f"inceptionv4 at 299x299: {n.forward_macs / 1e9:.2f} GMACs")
        return 0
    os.makedirs(args.out, exist_ok=True)
    bad = 0
    for key, p in profiles.items():
        text = dump(p)
        path = os.path.join(args.out, key + ".json")
        if args.check:
            with open(path) as f:
                if f.read() != text:
                    print(f"{path} is stale: run scripts/gen_profiles.py", file=sys.stderr)
                    bad = 1
        else:
            with open(path, "w") as f:
                f.write(text)
    return bad


if __name__ == "__main__":
    sys.exit(main())
