#!/usr/bin/python3
"""Checks that the library's vector kernels sum in registers: in every innermost loop of a kernel
chosen at run time ("avx" in its name, as baseline_instructions.py finds them) that runs at least 8
vector multiply-adds, at most one vector store to the stack for every 4 multiply-adds.

GCC keeps a tile's array of accumulators in memory when a loop over it is left for its late
unrolling or reads it by a run-time index (Note [Accumulators in registers],
backends/cpu/cpu_direct_tiles_avx2.cpp): the multiply-adds' loop then stores every accumulator
after each multiply-add, and the kernel runs at a third of its speed with the same bits, so no
other test sees it. A register spilled where a tile needs one more register than the host has
(28 accumulators, 4 vectors of weights and the broadcast value on AVX-512) is one store in 28.

  accumulators_in_registers.py LIBRARY

Exit 0 when every kernel keeps the rule, 1 (naming each loop's function, its stores and its
multiply-adds) when one does not, 2 when objdump cannot read the library. Standard library only.
"""
import re
import sys

from disassembly import disassembly

MULTIPLY_ADD = re.compile(r"^(vfn?m(add|sub)\d{3}[ps]s|vdpbf16ps)$")
STACK_STORE = re.compile(r"^%[xyz]mm\d+,.*\((%rsp|%rbp)[,)]")
MOST_STORES_PER_MULTIPLY_ADD = 1 / 4


def innermost_loops(instructions):
    """(first, last) indices of the loops a backward jump closes that hold no other such loop."""
    at = {address: i for i, (address, _, _) in enumerate(instructions)}
    loops = []
    for i, (address, mnemonic, operands) in enumerate(instructions):
        if not mnemonic.startswith("j") or not operands:
            continue
        try:
            target = int(operands.split()[0], 16)
        except ValueError:
            continue
        if target < address and target in at:
            loops.append((at[target], i))
    return [(a, b) for a, b in loops if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in loops)]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    functions = disassembly(sys.argv[1])
    checked, offenders = 0, []
    for function, instructions in functions.items():
        if "avx" not in function.lower():
            continue
        for first, last in innermost_loops(instructions):
            body = instructions[first:last + 1]
            multiply_adds = sum(bool(MULTIPLY_ADD.match(mnemonic)) for _, mnemonic, _ in body)
            if multiply_adds < 8:
                continue
            checked += 1
            stores = sum(mnemonic.startswith("vmov") and bool(STACK_STORE.match(operands))
                         for _, mnemonic, operands in body)
            if stores > multiply_adds * MOST_STORES_PER_MULTIPLY_ADD:
                offenders.append(f"{function}: a loop of {multiply_adds} multiply-adds stores {stores} vectors "
                                 f"to the stack (at {body[0][0]:x})")
    for offender in offenders:
        print(offender)
    if offenders:
        print(f"{len(offenders)} of {checked} kernel loops keep their accumulators in memory", file=sys.stderr)
        sys.exit(1)
    if checked == 0:
        print(f"{sys.argv[1]}: no kernel loop of vector multiply-adds found", file=sys.stderr)
        sys.exit(2)
    print(f"{checked} kernel loops of vector multiply-adds: their accumulators in registers")


if __name__ == "__main__":
    main()
