#!/usr/bin/env python3
"""An independent reference for the LLM data tests, written from the format description in
Megatron-LM (not from scaffold's C++): the MMapIndexedDataset files and GPTDataset's sample index.

  write PREFIX DTYPE_CODE   < {"documents": [[[tok, ...], ...], ...]}   writes PREFIX.bin/.idx
  read PREFIX               > {"dtype", "sizes", "pointers", "doc_idx", "sequences"}
  split STRING SIZE [STRING SIZE ...]
                            > [[train_begin, valid_begin, test_begin, end], ...] per pair
  index PREFIX SPLIT WHICH SEQ_LENGTH SEED NUM_SAMPLES
                            > {"documents", "num_epochs", "separate_last_epoch", "doc_idx",
                               "sample_idx", "shuffle_idx", "samples"}  (WHICH: 0 train, 1 valid, 2 test;
                               samples: the first NUM_SAMPLES in reading order, seq_length + 1 tokens each)

numpy does the random shuffles (np.random.RandomState(seed).shuffle), as Megatron does; everything
else is plain Python. Run with a python3 that has numpy (Debian's /usr/bin/python3)."""
import json
import struct
import sys

import numpy as np

MAGIC = b"MMIDIDX\x00\x00"
DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
          8: np.uint16}


def write(prefix, code, documents):
    dtype = np.dtype(DTYPES[code])
    sizes, doc_idx = [], [0]
    with open(prefix + ".bin", "wb") as f:
        for doc in documents:
            for seq in doc:
                f.write(np.array(seq, dtype=dtype).tobytes(order="C"))
                sizes.append(len(seq))
            doc_idx.append(len(sizes))
    pointers, address = [], 0
    for s in sizes:
        pointers.append(address)
        address += s * dtype.itemsize
    with open(prefix + ".idx", "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", code))
        f.write(struct.pack("<Q", len(sizes)))
        f.write(struct.pack("<Q", len(doc_idx)))
        f.write(np.array(sizes, dtype=np.int32).tobytes(order="C"))
        f.write(np.array(pointers, dtype=np.int64).tobytes(order="C"))
        f.write(np.array(doc_idx, dtype=np.int64).tobytes(order="C"))


def read(prefix):
    with open(prefix + ".idx", "rb") as f:
        buf = f.read()
    assert buf[:9] == MAGIC, "bad magic"
    (version,) = struct.unpack("<Q", buf[9:17])
    assert version == 1, "bad version"
    code = buf[17]
    n, d = struct.unpack("<QQ", buf[18:34])
    off = 34
    sizes = np.frombuffer(buf, dtype=np.int32, count=n, offset=off)
    off += sizes.nbytes
    pointers = np.frombuffer(buf, dtype=np.int64, count=n, offset=off)
    off += pointers.nbytes
    doc_idx = np.frombuffer(buf, dtype=np.int64, count=d, offset=off)
    assert off + doc_idx.nbytes == len(buf), "index length"
    data = np.memmap(prefix + ".bin", mode="r", order="C")
    dtype = np.dtype(DTYPES[code])
    seqs = [np.frombuffer(data, dtype=dtype, count=int(s), offset=int(p)).tolist() for s, p in zip(sizes, pointers)]
    return {"dtype": code, "sizes": sizes.tolist(), "pointers": pointers.tolist(), "doc_idx": doc_idx.tolist(),
            "sequences": seqs}


def split(string, size):
    sep = "," if "," in string else ("/" if "/" in string else None)
    weights = [float(s) for s in string.split(sep)] if sep else [float(string)]
    weights = (weights + [0.0, 0.0, 0.0])[:3]
    total = sum(weights)
    weights = [w / total for w in weights]
    bounds = [0]
    for w in weights:
        bounds.append(bounds[-1] + int(round(w * float(size))))
    excess = bounds[-1] - size
    return [bounds[0]] + [b - excess for b in bounds[1:]]


def index(prefix, split_string, which, seq_length, seed, num_samples):
    ds = read(prefix)
    sizes = np.array(ds["sizes"], dtype=np.int64)
    b = split(split_string, len(sizes))
    documents = np.arange(b[which], b[which + 1], dtype=np.int32)
    tokens_per_epoch = int(sizes[documents].sum())
    epochs = 0
    while True:
        epochs += 1
        if (epochs * tokens_per_epoch - 1) // seq_length >= num_samples:
            break
    separate = False
    before_last = 0
    if epochs > 1:
        before_last = ((epochs - 1) * tokens_per_epoch - 1) // seq_length
        per_epoch = (tokens_per_epoch - 1) // seq_length
        separate = (num_samples - before_last) < int(0.80 * per_epoch)
    rng = np.random.RandomState(seed=seed)

    def doc_epochs(k):
        d = np.tile(documents, k)
        rng.shuffle(d)
        return d

    doc_idx = np.concatenate([doc_epochs(epochs - 1), doc_epochs(1)]) if separate else doc_epochs(epochs)

    # The sample index, written as "where does the token that starts sample s sit": sample s
    # starts at global token s * seq_length of the shuffled concatenation (samples overlap by one
    # token), on the document holding that token; sample 0 is (0, 0) by definition.
    total = (epochs * tokens_per_epoch - 1) // seq_length
    starts = np.concatenate([[0], np.cumsum(sizes[doc_idx])])  # first global token of each position
    sample_idx = [[0, 0]]
    for s in range(1, total + 1):
        g = s * seq_length
        pos = int(np.searchsorted(starts, g, side="right") - 1)
        sample_idx.append([pos, int(g - starts[pos])])

    first = before_last if separate else total
    shuffle_a = np.arange(0, first, dtype=np.int64)
    rng.shuffle(shuffle_a)
    shuffle_idx = shuffle_a
    if first < total:
        shuffle_b = np.arange(first, total, dtype=np.int64)
        rng.shuffle(shuffle_b)
        shuffle_idx = np.concatenate([shuffle_a, shuffle_b])

    concat = np.concatenate([np.array(ds["sequences"][d], dtype=np.int64) for d in doc_idx])
    samples = []
    for i in range(min(num_samples, total)):
        s = int(shuffle_idx[i])
        samples.append(concat[s * seq_length: s * seq_length + seq_length + 1].tolist())
    return {"documents": [int(b[which]), int(b[which + 1])], "num_epochs": epochs, "separate_last_epoch": separate,
            "doc_idx": doc_idx.tolist(), "sample_idx": sample_idx, "shuffle_idx": shuffle_idx.tolist(),
            "samples": samples}


def main(argv):
    cmd = argv[1]
    if cmd == "write":
        write(argv[2], int(argv[3]), json.load(sys.stdin)["documents"])
    elif cmd == "read":
        json.dump(read(argv[2]), sys.stdout)
    elif cmd == "split":
        json.dump([split(argv[k], int(argv[k + 1])) for k in range(2, len(argv), 2)], sys.stdout)
    elif cmd == "index":
        json.dump(index(argv[2], argv[3], int(argv[4]), int(argv[5]), int(argv[6]), int(argv[7])), sys.stdout)
    else:
        raise SystemExit(f"unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
