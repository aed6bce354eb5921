#include "bert/tokenizer/spm_shim.h"

#include <sentencepiece_processor.h>

#include <cstring>
#include <memory>
#include <string>

namespace {
void set_error(char* error, size_t len, const std::string& message) {
  if (error == nullptr || len == 0) return;
  std::strncpy(error, message.c_str(), len - 1);
  error[len - 1] = '\0';
}
}  // namespace

extern "C" {

void* bertft_spm_load(const char* model_file, char* error, size_t error_len) {
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->Load(model_file);
  if (!status.ok()) {
    set_error(error, error_len, status.ToString());
    return nullptr;
  }
  return processor.release();
}

void bertft_spm_free(void* handle) {
  delete static_cast<sentencepiece::SentencePieceProcessor*>(handle);
}

int bertft_spm_size(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->GetPieceSize();
}

int bertft_spm_unk_id(void* handle) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->unk_id();
}

float bertft_spm_score(void* handle, int id) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->GetScore(id);
}

int bertft_spm_piece_to_id(void* handle, const char* piece, size_t piece_len) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->PieceToId(
      std::string(piece, piece_len));
}

const char* bertft_spm_id_to_piece(void* handle, int id) {
  return static_cast<sentencepiece::SentencePieceProcessor*>(handle)->IdToPiece(id).c_str();
}

int bertft_spm_encode(void* handle,
                      const char* text,
                      size_t text_len,
                      bertft_spm_piece_fn fn,
                      void* context,
                      char* error,
                      size_t error_len) {
  try {
    const auto* processor = static_cast<sentencepiece::SentencePieceProcessor*>(handle);
    const auto spt = processor->EncodeAsImmutableProto(std::string(text, text_len));
    for (const auto& piece : spt.pieces())
      fn(context, static_cast<int>(piece.id()), piece.piece().data(), piece.piece().size(),
         piece.begin(), piece.end());
    return 0;
  } catch (const std::exception& e) {
    set_error(error, error_len, e.what());
    return -1;
  }
}
}
