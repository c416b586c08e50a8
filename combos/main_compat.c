#include "moe/cli.h"

int main(int argc, char **argv) { return moe_cli_compat(argc, argv, stdout, stderr); }
