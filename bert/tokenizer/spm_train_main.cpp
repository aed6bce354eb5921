// bertft_spm_train: runs libsentencepiece's trainer on its command-line arguments
// (--input=... --model_prefix=...). A separate program because libsentencepiece cannot run in
// a process that has LibTorch's protobuf loaded (see spm_shim.h and train_sentencepiece_with_args).
#include <sentencepiece_trainer.h>

#include <iostream>
#include <string>

int main(int argc, char** argv) {
  std::string args;
  for (int i = 1; i < argc; ++i) args += (i > 1 ? " " : "") + std::string(argv[i]);
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  if (!status.ok()) {
    std::cerr << "sentencepiece trainer: " << status.ToString() << "\n";
    return 1;
  }
  return 0;
}
