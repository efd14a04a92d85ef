/* probe.c -- a program around a kernel that distalc rejects (tests/install/probe) */
#include "kernel.h"
int main(void) { return 0; }
