// One data reader on any bytes, chosen at build time by BERTFT_FUZZ_FORMAT (glue, tsv, csv,
// jsonl, squad, conll, swag, tagged_jsonl: token classification's JSON lines, read_tagged):
// fuzz/CMakeLists.txt builds one target per format.
#include "bert/common/error.h"
#include "data/readers.h"
#include "fuzz/fuzz_input.h"

namespace {
using bert::data::DataFormat;

constexpr std::string_view kFormat = BERTFT_FUZZ_FORMAT;

DataFormat format() {
  if (kFormat == "glue") return DataFormat::kGlue;
  if (kFormat == "tsv") return DataFormat::kTsv;
  if (kFormat == "csv") return DataFormat::kCsv;
  if (kFormat == "jsonl" || kFormat == "tagged_jsonl") return DataFormat::kJsonl;
  if (kFormat == "squad") return DataFormat::kSquad;
  if (kFormat == "conll") return DataFormat::kConll;
  return DataFormat::kSwag;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* const glue_tasks[] = {"cola", "sst2", "mrpc", "stsb", "qqp",
                                           "mnli", "qnli", "rte",  "wnli"};
  const bert::fuzz::InputFile file(data + 1, size - 1);
  bert::data::DataSpec spec;
  spec.path = file.path();
  spec.format = format();
  spec.glue_task = glue_tasks[data[0] % 9];
  spec.header = (data[0] & 0x10) == 0;
  spec.skip_malformed = (data[0] & 0x20) != 0;
  if (data[0] & 0x40) spec.limit = data[0] & 7;
  if (data[0] & 0x80)  // mapped fields; for text examples, a multi-label set of 0/1 columns
    spec.columns = kFormat == "tagged_jsonl"
                       ? std::map<std::string, std::string>{{"token", "words"}, {"tag", "labels"}}
                       : std::map<std::string, std::string>{{"text_a", "0"}, {"labels", "1,2"}};
  try {
    if (kFormat == "tagged_jsonl") {
      (void)bert::data::read_tagged(spec);
      return 0;
    }
    switch (spec.format) {
      case DataFormat::kSquad:
        (void)bert::data::read_squad(spec);
        break;
      case DataFormat::kConll:
        (void)bert::data::read_conll(spec);
        break;
      case DataFormat::kSwag:
        (void)bert::data::read_choice_examples(spec);
        break;
      default:
        (void)bert::data::read_text_examples(spec);
    }
  } catch (const bert::Error&) {
  }
  return 0;
}
