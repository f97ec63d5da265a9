#!/usr/bin/python3
"""Checks that a portable build of libcnnengine runs on any x86-64 host: every function of the
library uses only the x86-64 baseline's instructions (SSE2), except the kernels compiled for an
instruction set and chosen when they run, whose names say which (isa_avx2::, isa_avx512::,
kernel_avx512, ..._avx2: "avx" in the name; backends/cpu/detail/cpu_isa.hpp). A function that
breaks the rule would crash an older host with an illegal instruction.

  baseline_instructions.py LIBRARY

Exit 0 when the library keeps the rule, 1 (naming the functions and an instruction of each) when
it does not, 2 when objdump cannot read it. Standard library only.
"""
import re
import sys

from disassembly import disassembly

# Beyond SSE2: VEX and EVEX encodings (every AVX instruction's mnemonic starts with "v"), the SSE3
# to SSE4.2, POPCNT, BMI and F16C instructions a compiler may choose on its own, and AMX's.
LATER = {
    "pshufb", "palignr", "pabsb", "pabsw", "pabsd", "phaddw", "phaddd", "phaddsw", "phsubw", "phsubd",
    "pmaddubsw", "pmulhrsw", "psignb", "psignw", "psignd", "pblendw", "pblendvb", "blendps", "blendpd",
    "blendvps", "blendvpd", "dpps", "dppd", "extractps", "insertps", "pextrb", "pextrd", "pextrq", "pinsrb",
    "pinsrd", "pinsrq", "pmaxsb", "pmaxsd", "pminsb", "pminsd", "pmaxuw", "pmaxud", "pminuw", "pminud",
    "pmuldq", "pmulld", "ptest", "roundps", "roundpd", "roundss", "roundsd", "packusdw", "pcmpeqq", "pcmpgtq",
    "crc32", "popcnt", "movntdqa", "mpsadbw", "phminposuw", "haddps", "haddpd", "hsubps", "hsubpd", "addsubps",
    "addsubpd", "movddup", "movshdup", "movsldup", "lddqu", "andn", "bextr", "blsi", "blsmsk", "blsr", "bzhi",
    "pdep", "pext", "rorx", "sarx", "shlx", "shrx", "lzcnt",
    # AMX's tiles
    "ldtilecfg", "sttilecfg", "tilerelease", "tilezero", "tileloadd", "tileloaddt1", "tilestored", "tdpbf16ps",
    "tdpfp16ps", "tdpbssd", "tdpbsud", "tdpbusd", "tdpbuud",
}
WIDE_REGISTER = re.compile(r"%(ymm|zmm)\d+|%k[0-7]\b")


def later_instruction(mnemonic, operands):
    # AT&T mnemonics carry a size suffix (popcntl, shlxq): compare without it too.
    bare = mnemonic.rstrip("bwlq") if mnemonic not in LATER else mnemonic
    return (mnemonic.startswith("v") or mnemonic in LATER or bare in LATER or WIDE_REGISTER.search(operands))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    functions = disassembly(sys.argv[1])
    offenders = {}
    for function, instructions in functions.items():
        if "avx" in function.lower() or function.endswith("@plt"):
            continue
        for _, mnemonic, operands in instructions:
            if later_instruction(mnemonic, operands):
                offenders[function] = f"{mnemonic} {operands}".strip()
                break
    for function, instruction in sorted(offenders.items()):
        print(f"{function}: {instruction}")
    if offenders:
        print(f"{len(offenders)} of {len(functions)} functions use instructions beyond the x86-64 baseline outside the "
              "kernels chosen at run time", file=sys.stderr)
        sys.exit(1)
    print(f"{len(functions)} functions: the x86-64 baseline, except the kernels chosen at run time")


if __name__ == "__main__":
    main()
