// cohort: one binary, subcommands. Turns typed errors into exit codes.
#include <cstdio>

int main(int argc, char** argv) { return 0; }
