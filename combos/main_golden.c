#include "moe/golden.h"

int main(int argc, char **argv) { return moe_cli_golden(argc, argv, stdout, stderr); }
