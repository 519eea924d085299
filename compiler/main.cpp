#include "compiler/Command.h"

int main(int argc, char** argv) { return tn::cli::run(argc, argv); }
