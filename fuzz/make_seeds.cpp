// Writes the seed corpus of every fuzz target: `bertft_fuzz_seeds SOURCE_DIR OUT_DIR` makes
// OUT_DIR/<target>/seed-<n>, each a small valid input that the project generates itself
// (weights it writes, a pickle it spells out, its own recipes, texts made up here).
#include <caffe2/serialize/inline_container.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "bert/checkpoint/safetensors.h"
#include "bert/model/bert_config.h"

namespace fs = std::filesystem;

namespace {

void write(const fs::path& dir, const std::vector<std::string>& seeds) {
  fs::create_directories(dir);
  for (size_t i = 0; i < seeds.size(); ++i)
    std::ofstream(dir / ("seed-" + std::to_string(i)), std::ios::binary) << seeds[i];
}

std::string u16(uint16_t n) {
  return {static_cast<char>(n & 0xFF), static_cast<char>(n >> 8)};
}
std::string u32(uint32_t n) {
  return {static_cast<char>(n & 0xFF), static_cast<char>((n >> 8) & 0xFF),
          static_cast<char>((n >> 16) & 0xFF), static_cast<char>(n >> 24)};
}
std::string unicode(const std::string& s) {
  return "X" + u32(static_cast<uint32_t>(s.size())) + s;
}
std::string small_int(int n) {
  return "K" + std::string(1, static_cast<char>(n));
}

/// One tensor entry as torch.save pickles it: _rebuild_tensor_v2((storage pid), offset, size,
/// stride, requires_grad, OrderedDict()).
std::string tensor(const std::string& storage_type,
                   const std::string& key,
                   int numel,
                   const std::vector<int>& size,
                   const std::vector<int>& stride,
                   bool legacy) {
  std::string p = "ctorch._utils\n_rebuild_tensor_v2\n(";
  p += "(" + unicode("storage") + "ctorch\n" + storage_type + "\n" + unicode(key) + unicode("cpu") +
       small_int(numel) + (legacy ? "N" : "") + "tQ";  // legacy ids end in the view metadata
  p += small_int(0);
  p += "(";
  for (int s : size) p += small_int(s);
  p += "t(";
  for (int s : stride) p += small_int(s);
  p += "t\x89"
       "ccollections\nOrderedDict\n)R"
       "tR";
  return p;
}

/// A state dict of two tensors: a 4x4 float matrix (storage 0, 64 bytes) and a 1-element long
/// (storage 1, 8 bytes), as a protocol-2 pickle (`legacy`: as torch.save's pre-1.6 format has it).
std::string state_dict_pickle(bool legacy = false) {
  return std::string("\x80\x02}(") + unicode("encoder.weight") +
         tensor("FloatStorage", "0", 16, {4, 4}, {4, 1}, legacy) + unicode("position_ids") +
         tensor("LongStorage", "1", 1, {1}, {1}, legacy) + "u.";
}

std::string torch_zip(const std::string& pickle) {
  std::string zip;
  caffe2::serialize::PyTorchStreamWriter writer([&zip](const void* bytes, size_t n) {
    zip.append(static_cast<const char*>(bytes), n);
    return n;
  });
  writer.writeRecord("data.pkl", pickle.data(), pickle.size());
  const char storage[64] = {0, 0, -128, 63};
  writer.writeRecord("data/0", storage, 64);
  writer.writeRecord("data/1", storage, 8);
  writer.writeEndOfFile();
  return zip;
}

/// The same state dict in torch.save's legacy (pre-1.6) layout: the magic number, protocol
/// version and system-info pickles, the state dict, the storage keys, then each storage as an
/// int64 element count and its bytes.
std::string torch_legacy() {
  std::string file("\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.", 15);
  file += "\x80\x02M\xe9\x03.";
  file += "\x80\x02}(" + unicode("little_endian") + "\x88u.";
  file += state_dict_pickle(/*legacy=*/true);
  file += "\x80\x02](" + unicode("0") + unicode("1") + "e.";
  const char storage[64] = {0, 0, -128, 63};
  file += std::string("\x10\0\0\0\0\0\0\0", 8) + std::string(storage, 64);
  file += std::string("\x01\0\0\0\0\0\0\0", 8) + std::string(storage, 8);
  return file;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SOURCE_DIR OUT_DIR\n", argv[0]);
    return 2;
  }
  const fs::path source(argv[1]), out(argv[2]);
  torch::manual_seed(1);
  bert::TensorMap tensors{{"embeddings.word_embeddings.weight", torch::randn({5, 4})},
                          {"pooler.dense.bias", torch::randn({4}).to(torch::kBFloat16)},
                          {"position_ids", torch::arange(4)}};
  write(out / "safetensors", {bert::safetensors_bytes(tensors, {{"format", "pt"}}),
                              bert::safetensors_bytes({{"a", torch::zeros({0, 3})}}, nullptr)});
  const auto pickle = state_dict_pickle();
  write(out / "torch_pickle", {pickle});
  write(out / "torch_zip", {torch_zip(pickle), torch_legacy()});

  bert::BertConfig config;
  config.vocab_size(99).hidden_size(32).num_hidden_layers(2).num_attention_heads(4);
  config.id2label({"negative", "positive"}).architectures({"BertForSequenceClassification"});
  write(out / "config_json", {config.to_json().dump(1), bert::BertConfig().to_json().dump()});

  // Instance shards (little-endian, as written on x86): "BFTPRE01", int64 count, then per
  // instance uint16 tokens n, uint16 segment A length, uint8 NSP (0, 1, 2 = packed), uint16
  // masked m, n int32 ids, n word-start bytes, m uint16 positions, m int32 labels.
  const auto record = [](std::vector<uint32_t> ids, uint16_t a, uint8_t nsp,
                         std::vector<std::pair<uint16_t, uint32_t>> masked) {
    std::string r = u16(static_cast<uint16_t>(ids.size())) + u16(a) +
                    std::string(1, static_cast<char>(nsp)) +
                    u16(static_cast<uint16_t>(masked.size()));
    for (const auto id : ids) r += u32(id);
    r += std::string(ids.size(), '\1');
    for (const auto& m : masked) r += u16(m.first);
    for (const auto& m : masked) r += u32(m.second);
    return r;
  };
  const auto shard = [](const std::vector<std::string>& records) {
    std::string s = "BFTPRE01" + u32(static_cast<uint32_t>(records.size())) + u32(0);
    for (const auto& r : records) s += r;
    return s;
  };
  write(out / "instance_shard",
        {shard({record({101, 7, 102, 8, 9, 102}, 3, 0, {{1, 17}}),
                record({101, 7, 4, 102, 9, 102}, 4, 1, {})}),
         shard({record({101, 5, 6, 102, 8, 102}, 6, 2, {{2, 40}, {4, 41}})})});

  std::vector<std::string> recipes;
  for (const auto& entry : fs::recursive_directory_iterator(source / "recipes"))
    if (entry.path().extension() == ".yaml") {
      std::ifstream in(entry.path(), std::ios::binary);
      recipes.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  write(out / "recipe_yaml", recipes);

  write(out / "wordpiece",
        {std::string("\x10") + "The tokenizer's fuzzing, naïve!",
         std::string("\x21") + "UNABLE to 中文 ß" + std::string(1, '\0') + "second part é",
         "\x07\t \u00a0x"});

  write(out / "byte_level_bpe",
        {std::string("\x10") + "the theater's singing, été <mask> end  ",
         std::string("\x21") + "a<s>b</s>  \t<mask>" + std::string(1, '\0') + "second 中文 😀",
         "\x07\u3000 \u00a0x'll"});

  write(
      out / "unigram",
      {std::string("\x00") + "Ab\x01 ab--- -----  the\tcafe\xcc\x81 A\xcc\x81\xcc\x82 \xe2\x98\x83",
       std::string("\x02") + "\x01"
                             "Abab \xef\xbb\xbf x\xe2\x80\x8b  ",
       std::string("\x01\x08\x00") + std::string("\x04\x00\x00\x00\x00\x00\x00\x00", 8) + "ab"});

  {
    // An NPY 1.0 file of 2 x 3 float32 (the layout `bertft embed --out x.npy` writes).
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    while ((10 + header.size() + 1) % 64 != 0) header += ' ';
    header += '\n';
    std::string npy = "\x93NUMPY";
    npy += '\x01';
    npy += '\x00';
    npy += static_cast<char>(header.size() & 0xff);
    npy += static_cast<char>(header.size() >> 8);
    npy += header;
    const float values[6] = {1.0F, -2.0F, 0.5F, 3.0F, 0.0F, -0.25F};
    npy.append(reinterpret_cast<const char*>(values), sizeof values);
    write(out / "embeddings_npy", {npy, npy.substr(0, npy.size() - 4)});
  }
  {
    // tokenizer_dir: a first byte (bit 0 clear: WordPiece, or from tokenizer.json alone where
    // bits 1-2 are both set (WordPiece, byte-level BPE or Unigram); set: bits 1-2 pick byte-level BPE (0), a SentencePiece model with
    // its own ids (1) or XLM-R's numbering of it (2); the high nibble: room for added tokens),
    // then tokenizer_config.json, tokenizer.json,
    // added_tokens.json and special_tokens_map.json split at NUL bytes. The WordPiece
    // vocabulary has 199 entries, the BPE one 264.
    const std::string nul(1, '\0');
    write(out / "tokenizer_dir",
          {std::string("\x20") +
               R"({"do_lower_case": false, "model_max_length": 512, "cls_token": "[CLS]"})" + nul +
               R"({"added_tokens": [{"id": 199, "content": "<e>", "special": true},)" +
               R"( {"id": 200, "content": "<f>", "lstrip": true}]})",
           std::string("\x21") +
               R"({"add_prefix_space": false, "mask_token": {"content": "<mask>"}})" + nul +
               R"({"added_tokens": null})" + nul + R"({"<e>": 264})" + nul +
               R"({"additional_special_tokens": ["<e>"]})",
           std::string("\x0a") + nul + R"({"added_tokens": []})",
           std::string("\x02") + R"({"do_lower_case": true, "strip_accents": null,)" +
               R"( "tokenize_chinese_chars": false, "tokenizer_class": "BertTokenizer"})",
           std::string("\x13") + R"({"do_lower_case": false, "keep_accents": true,)" +
               R"( "tokenizer_class": "AlbertTokenizer", "model_max_length": 512})",
           std::string("\x35") + R"({"tokenizer_class": "XLMRobertaTokenizer"})" + nul +
               R"({"added_tokens": [{"id": 35, "content": "<e>", "lstrip": true}]})" + nul +
               R"({"<f>": 36})",
           std::string("\x0e") + nul +
               R"({"model": {"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[PAD]": 0,)" +
               R"( "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "the": 5, "tok": 6,)" +
               R"( "##en": 7}}, "normalizer": {"type": "BertNormalizer", "lowercase": true,)" +
               R"( "strip_accents": null}, "pre_tokenizer": {"type": "BertPreTokenizer"},)" +
               R"( "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken":)" +
               R"( {"id": "[CLS]"}}, {"Sequence": {"id": "A"}}, {"SpecialToken": {"id":)" +
               R"( "[SEP]"}}]}, "added_tokens": [{"id": 8, "content": "<e>"}]})",
           std::string("\x0e") + nul +
               R"({"model": {"type": "BPE", "dropout": null, "continuing_subword_prefix": null,)" +
               R"( "vocab": {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "t": 4, "h": 5, "e": 6,)" +
               R"( "th": 7, "the": 8, "\u0120": 9, "\u0120the": 10, "<mask>": 11}, "merges":)" +
               R"( [["t", "h"], "th e", ["\u0120", "the"]]}, "normalizer": null, "pre_tokenizer":)" +
               R"( {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},)" +
               R"( "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls":)" +
               R"( ["<s>", 0], "trim_offsets": true}, "decoder": {"type": "ByteLevel"},)" +
               R"( "added_tokens": [{"id": 11, "content": "<mask>", "lstrip": true}]})",
           // XLM-R's Unigram (no precompiled map; then one that is not a map).
           std::string("\x0e") + nul +
               R"({"model": {"type": "Unigram", "unk_id": 3, "vocab": [["<s>", 0.0], ["<pad>",)" +
               R"( 0.0], ["</s>", 0.0], ["<unk>", 0.0], ["\u2581the", -1.5], ["\u2581", -2.0],)" +
               R"( ["t", -3.0], ["h", -3.0], ["e", -3.1], ["<mask>", 0.0]], "byte_fallback":)" +
               R"( false}, "normalizer": {"type": "Sequence", "normalizers": [{"type":)" +
               R"( "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},)" +
               R"( "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581",)" +
               R"( "prepend_scheme": "always", "split": true}, "decoder": {"type": "Metaspace",)" +
               R"( "replacement": "\u2581", "add_prefix_space": true}, "post_processor":)" +
               R"( {"type": "RobertaProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]},)" +
               R"( "added_tokens": [{"id": 9, "content": "<mask>", "lstrip": true}]})",
           std::string("\x0e") + nul +
               R"({"model": {"type": "Unigram", "unk_id": 3, "vocab": [["<s>", 0.0], ["<pad>",)" +
               R"( 0.0], ["</s>", 0.0], ["<unk>", 0.0], ["<mask>", 0.0]]}, "normalizer": {"type":)" +
               R"( "Sequence", "normalizers": [{"type": "Precompiled", "precompiled_charsmap":)" +
               R"( "AAAAAAAA"}, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content":)" +
               R"( " "}]}, "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581"},)" +
               R"( "decoder": {"type": "Metaspace", "replacement": "\u2581"}})",
           // transformers 4.0's form: no collapsing, WhitespaceSplit before Metaspace.
           std::string("\x0e") + nul +
               R"({"model": {"type": "Unigram", "unk_id": 3, "vocab": [["<s>", 0.0], ["<pad>",)" +
               R"( 0.0], ["</s>", 0.0], ["<unk>", 0.0], ["\u2581the", -1.5], ["\u2581", -2.0],)" +
               R"( ["<mask>", 0.0]]}, "normalizer": null, "pre_tokenizer": {"type": "Sequence",)" +
               R"( "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Metaspace",)" +
               R"( "replacement": "\u2581", "add_prefix_space": true}]}, "decoder": {"type":)" +
               R"( "Metaspace", "replacement": "\u2581", "add_prefix_space": true}})"});
  }
  {  // ner_text: the first byte picks the tokenizer (even: WordPiece, odd: byte-level BPE).
    std::vector<std::string> texts;
    for (const char* tokenizer : {"\x02", "\x01"})
      for (const std::string text :
           {"Acme Corp. hired Jane O'Neil in New York.", "中文字符 and 😀 emoji\u00a0here",
            "tab\tsep\x01control \xe2\x80\x8b zero", "ab  ab's  ba. a<mask> </s>"})
        texts.push_back(tokenizer + text);
    write(out / "ner_text", texts);
  }

  write(out / "reader_glue",
        {std::string(1, '\0') + "src\t1\t\tA sentence.\nsrc\t0\t*\tAnother one.\n",
         std::string("\x01") + "sentence\tlabel\ngood film\t1\nbad film\t0\n",
         std::string("\x02") + "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t7\t8\tA b.\tA c.\n",
         std::string("\x03") +
             "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t"
             "sentence1\tsentence2\tscore\n0\tmain\tf\t2012\t0\ts\ts\tA.\tB.\t3.2\n",
         std::string("\x07") + "index\tsentence1\tsentence2\tlabel\n0\tA.\tB.\tentailment\n"});
  write(out / "reader_tsv", {"text\tlabel\nfirst row\tyes\nsecond row\tno\n",
                             std::string("\x10") + "a\tb\tc\n1\t2\t3\n"});
  write(out / "reader_csv",
        {std::string(1, '\0') + "text,label\n\"quoted, text\",1\nplain,0\n",
         std::string(1, '\0') + "sentence1,sentence2,label\n\"a \"\"b\"\"\",c,0\n"});
  write(out / "reader_jsonl", {std::string(1, '\0') + "{\"text\": \"one\", \"label\": \"a\"}\n"
                                                      "{\"text\": \"two\", \"text_pair\": \"x\", "
                                                      "\"label\": \"b\", \"id\": \"7\"}\n"});
  write(out / "reader_squad",
        {std::string(1, '\0') + R"({"version": "v2.0", "data": [{"title": "T", "paragraphs": [)"
                                R"({"context": "Alpha beta gamma.", "qas": [{"id": "q1", )"
                                R"("question": "Which?", "answers": [{"text": "beta", )"
                                R"("answer_start": 6}], "is_impossible": false}]}]}]})"});
  write(out / "reader_conll", {std::string(1, '\0') + "-DOCSTART- -X- -X- O\n\nAlice NNP B-NP "
                                                      "B-PER\nsleeps VBZ B-VP O\n\nBob NNP B-NP "
                                                      "B-PER\n"});
  write(out / "reader_tagged_jsonl",
        {std::string(1, '\0') +
             "{\"tokens\": [\"Alice\", \"sleeps\"], \"ner_tags\": [\"B-PER\", \"O\"]}\n"
             "{\"id\": \"2\", \"tokens\": [\"Bob\"], \"ner_tags\": [1], \"pos_tags\": [22]}\n",
         std::string("\x80") + "{\"words\": [\"a\", \"b\"], \"labels\": [\"O\", \"B-LOC\"]}\n"
                                "{\"words\": [], \"labels\": []}\n"});
  write(out / "reader_swag",
        {std::string(1, '\0') + ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,"
                                "ending1,ending2,ending3,label\n0,v1,3,A b,A,b,gold,x,y,z,w,2\n"});
  write(out / "predictions",
        {"{\"id\": \"0\", \"label\": \"yes\"}\n{\"id\": \"1\", \"label\": \"no\"}\n", "1\n0\n1\n",
         "{\"q1\": \"beta\", \"q2\": \"\"}", "{\"q1\": 0.25}"});
  return 0;
}
