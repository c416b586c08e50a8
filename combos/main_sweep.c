#include "moe/cli.h"

int main(int argc, char **argv) { return moe_cli_sweep(argc, argv, stdout, stderr); }
