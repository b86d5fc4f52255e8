// The three character classes of GPT-2's pre-tokenisation regex: \p{L} (letters, general category
// L*), \p{N} (numbers, N*) and \s (the White_Space property). The ranges are generated from
// Python's unicodedata (gen_unicode_classes.py); nothing else about Unicode is modelled here (no
// normalisation, no case mapping: GPT-2 applies none).
#pragma once

namespace scaffold::llm {

bool is_unicode_letter(char32_t c);
bool is_unicode_number(char32_t c);
bool is_unicode_space(char32_t c);
// The Unicode version the tables were generated from, e.g. "14.0.0".
const char* unicode_classes_version();

}  // namespace scaffold::llm
