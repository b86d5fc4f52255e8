// `scaffold preprocess_data`: flags named as Megatron's (--input, --output-prefix, --vocab-file,
// --merge-file, --json-keys, --append-eod, --workers; --tokenizer-type and --dataset-impl are
// accepted with their only supported values), so a Megatron command line runs unchanged after the
// program name. Rank 0 does the work; under mpirun the other ranks only agree on the outcome.
#include "workloads/llm_training/data/preprocess_command.hpp"

#include <fmt/format.h>

#include <memory>

#include "core/log.hpp"
#include "workloads/llm_training/data/preprocess.hpp"

namespace scaffold::llm {

cli::Subcommand add_preprocess_data(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "preprocess_data",
      "Megatron's preprocess_data.py for GPT: tokenize a JSONL file with GPT-2's BPE "
      "into an indexed dataset (.bin/.idx) for llm_training --data-path");
  auto o = std::make_shared<PreprocessOptions>();
  auto paths = std::make_shared<std::array<std::string, 4>>();
  sub->add_option("--input", (*paths)[0],
                  "JSONL input: one JSON object per line, one document each")
      ->required();
  sub->add_option("--output-prefix", (*paths)[1],
                  "output prefix: writes <prefix>_<key>_document.bin and .idx per JSON key")
      ->required();
  sub->add_option("--vocab-file", (*paths)[2], "GPT-2 vocab.json (token -> id)")->required();
  sub->add_option("--merge-file", (*paths)[3], "GPT-2 merges.txt (BPE merges in rank order)")
      ->required();
  sub->add_option("--json-keys", o->json_keys, "keys of the text to tokenize, one output per key")
      ->capture_default_str();
  sub->add_flag("--append-eod", o->append_eod, "end every non-empty document with <|endoftext|>");
  sub->add_option("--workers", o->workers, "tokenizer threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  auto tokenizer_type = std::make_shared<std::string>("GPT2BPETokenizer");
  auto dataset_impl = std::make_shared<std::string>("mmap");
  sub->add_option("--tokenizer-type", *tokenizer_type,
                  "the tokenizer (GPT-2's BPE is the one supported)")
      ->capture_default_str()
      ->check(CLI::IsMember({"GPT2BPETokenizer"}));
  sub->add_option("--dataset-impl", *dataset_impl,
                  "the output format (Megatron's mmap indexed dataset)")
      ->capture_default_str()
      ->check(CLI::IsMember({"mmap"}));
  return {sub, [o, paths, tokenizer_type, dataset_impl](cli::RunContext& ctx) {
            PreprocessOptions options = *o;
            options.input = (*paths)[0];
            options.output_prefix = (*paths)[1];
            options.vocab_file = (*paths)[2];
            options.merge_file = (*paths)[3];
            dist::run_agreed(ctx.comm, [&] {
              if (ctx.comm.rank() != 0) return;
              const PreprocessResult r = preprocess_jsonl(options);
              for (const PreprocessOutput& out : r.outputs)
                LOG_INFO("{}: {} documents, {} sequences, {} tokens -> {}.bin, {}.idx", out.key,
                         out.documents, out.sequences, out.tokens, out.prefix.string(),
                         out.prefix.string());
              LOG_INFO("Processed {} documents ({:.1f} docs/s, {:.2f} MB/s) in {:.2f} s.", r.lines,
                       static_cast<double>(r.lines) / std::max(r.seconds, 1e-9),
                       static_cast<double>(r.input_bytes) / 1e6 / std::max(r.seconds, 1e-9),
                       r.seconds);
            });
            return 0;
          }};
}

}  // namespace scaffold::llm
