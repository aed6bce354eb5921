#pragma once

// C interface of the bertft_spm module, the only code linked against libsentencepiece.
// libsentencepiece exports a bundled copy of protobuf-lite that clashes with the libprotobuf
// LibTorch loads (a crash in static initialisation when both are linked into one program), so
// the module is dlopen()ed with RTLD_LOCAL | RTLD_DEEPBIND and reached only through these
// functions.

#include <stddef.h>
#include <stdint.h>

extern "C" {

typedef void (*bertft_spm_piece_fn)(
    void* context, int id, const char* piece, size_t piece_len, uint32_t begin, uint32_t end);

/// Returns a processor handle, or null with a message in `error`.
void* bertft_spm_load(const char* model_file, char* error, size_t error_len);
void bertft_spm_free(void* handle);
int bertft_spm_size(void* handle);
int bertft_spm_unk_id(void* handle);
float bertft_spm_score(void* handle, int id);
int bertft_spm_piece_to_id(void* handle, const char* piece, size_t piece_len);
/// The piece of `id` (valid while the handle lives).
const char* bertft_spm_id_to_piece(void* handle, int id);
/// Encodes UTF-8 text, calling `fn` for every piece (byte spans relative to `text`).
/// Returns 0, or -1 with a message in `error`.
int bertft_spm_encode(void* handle,
                      const char* text,
                      size_t text_len,
                      bertft_spm_piece_fn fn,
                      void* context,
                      char* error,
                      size_t error_len);
}
