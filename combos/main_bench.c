#include "moe/cli.h"

int main(int argc, char **argv) { return moe_cli_bench(argc, argv, stdout, stderr); }
