#!/usr/bin/env python3
"""An independent GPT-2 BPE for the preprocess_data tests, written from GPT-2's published
algorithm (encoder.py: bytes_to_unicode, the pre-tokenisation pattern, rank-ordered merges), in
plain Python with the standard library's `re`:

  corpus OUT_DIR LIMIT FILE...        writes OUT_DIR/corpus.txt (the files' text without No/Nl or
                                       control characters other than tab and newline, at most
                                       LIMIT characters) and OUT_DIR/corpus.jsonl (one paragraph a
                                       line, under "text")
  train TEXT_FILE NUM_MERGES OUT_DIR   learns NUM_MERGES merges on the text (most frequent pair,
                                       ties to the smaller pair) and writes OUT_DIR/vocab.json and
                                       OUT_DIR/merges.txt in GPT-2's format
  encode VOCAB MERGES JSONL KEY EOD    prints the token ids of every non-blank line's KEY as JSON
                                       (EOD 1: each non-empty document ends with <|endoftext|>)

`re` has no \\p{L} or \\p{N}: letters are [^\\W\\d_] and numbers \\d, which is GPT-2's pattern
exactly for text without Unicode No/Nl characters or the separators U+001C..U+001F (the tests'
text is filtered so)."""
import json
import re
import sys
import unicodedata
from collections import Counter

PAT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


BYTE_ENCODER = bytes_to_unicode()


def words(text):
    return ["".join(BYTE_ENCODER[b] for b in tok.encode("utf-8")) for tok in PAT.findall(text)]


def train(text_file, num_merges, out_dir):
    with open(text_file, encoding="utf-8") as f:
        counts = Counter(words(f.read()))
    vocab = {tuple(w): c for w, c in counts.items()}
    merges = []
    for _ in range(num_merges):
        pairs = Counter()
        for w, c in vocab.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        new_vocab = {}
        for w, c in vocab.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            new_vocab[tuple(out)] = new_vocab.get(tuple(out), 0) + c
        vocab = new_vocab
    tokens = list(BYTE_ENCODER.values()) + [a + b for a, b in merges] + ["<|endoftext|>"]
    with open(out_dir + "/vocab.json", "w", encoding="utf-8") as f:
        json.dump({t: i for i, t in enumerate(tokens)}, f, ensure_ascii=False)
    with open(out_dir + "/merges.txt", "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")


def encode_all(vocab_file, merge_file, jsonl, key, eod):
    with open(vocab_file, encoding="utf-8") as f:
        encoder = json.load(f)
    with open(merge_file, encoding="utf-8") as f:
        merges = [tuple(line.split()) for line in f.read().split("\n")[1:-1]]
    ranks = dict(zip(merges, range(len(merges))))

    def bpe(token):
        word = tuple(token)
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            bigram = min(pairs, key=lambda p: ranks.get(p, float("inf")))
            if bigram not in ranks:
                break
            first, second = bigram
            new, i = [], 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                except ValueError:
                    new.extend(word[i:])
                    break
                new.extend(word[i:j])
                i = j
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new.append(first + second)
                    i += 2
                else:
                    new.append(word[i])
                    i += 1
            word = tuple(new)
        return word

    out = []
    with open(jsonl, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            ids = [encoder[t] for w in words(json.loads(line)[key]) for t in bpe(w)]
            if ids and eod:
                ids.append(encoder["<|endoftext|>"])
            out.append(ids)
    json.dump(out, sys.stdout)


def corpus(out_dir, limit, files):
    text = ""
    for name in files:
        with open(name, encoding="utf-8") as f:
            text += f.read() + "\n\n"
    keep = [c for c in text if c in "\t\n" or unicodedata.category(c) not in ("No", "Nl", "Cc")]
    text = "".join(keep)[:limit]
    with open(out_dir + "/corpus.txt", "w", encoding="utf-8") as f:
        f.write(text)
    with open(out_dir + "/corpus.jsonl", "w", encoding="utf-8") as f:
        for para in text.split("\n\n"):
            f.write(json.dumps({"text": para}) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "corpus":
        corpus(sys.argv[2], int(sys.argv[3]), sys.argv[4:])
    elif sys.argv[1] == "train":
        train(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "encode":
        encode_all(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6] == "1")
    else:
        raise SystemExit(f"unknown command {sys.argv[1]}")
