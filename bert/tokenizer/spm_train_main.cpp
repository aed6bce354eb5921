// bertft_spm_train: runs libsentencepiece's trainer on its command-line arguments, each one
// `--name=value` (--input=... --model_prefix=...). A separate program because libsentencepiece
// cannot run in a process that has LibTorch's protobuf loaded (see spm_shim.h and
// train_sentencepiece_with_args). The arguments go to the trainer as a map, each value whole:
// its one-string form splits values at spaces (a corpus path with a space failed) and logs
// its command line before it reads --minloglevel.
#include <sentencepiece_trainer.h>

#include <iostream>
#include <string>
#include <unordered_map>

int main(int argc, char** argv) {
  std::unordered_map<std::string, std::string> options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto equals = arg.find('=');
    if (arg.rfind("--", 0) != 0 || equals == std::string::npos || equals == 2) {
      std::cerr << "sentencepiece trainer: argument '" << arg << "': expected --name=value\n";
      return 1;
    }
    options[arg.substr(2, equals - 2)] = arg.substr(equals + 1);
  }
  const auto status = sentencepiece::SentencePieceTrainer::Train(options);
  if (!status.ok()) {
    std::cerr << "sentencepiece trainer: " << status.ToString() << "\n";
    return 1;
  }
  return 0;
}
