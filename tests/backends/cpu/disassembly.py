"""The disassembly of a library as the CPU tests read it: `objdump -d -C --no-show-raw-insn`, its
functions by name (C++ names demangled), each a list of (address, mnemonic, operands); functions
of one name (in anonymous namespaces of two files) share the list.

disassembly(LIBRARY) exits the calling script with status 2 (and objdump's message) where objdump
cannot read the library or finds no function in it. Standard library only.
"""
import re
import subprocess
import sys

FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")
INSTRUCTION = re.compile(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$")


def disassembly(library):
    out = subprocess.run(["objdump", "-d", "-C", "--no-show-raw-insn", library], capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr.strip() or "objdump failed", file=sys.stderr)
        sys.exit(2)
    functions, function = {}, None
    for line in out.stdout.splitlines():
        named = FUNCTION.match(line)
        if named:
            function = named.group(1)
            functions.setdefault(function, [])
            continue
        instruction = INSTRUCTION.match(line)
        if function is not None and instruction:
            functions[function].append((int(instruction.group(1), 16), instruction.group(2), instruction.group(3)))
    if not functions:
        print(f"{library}: no functions disassembled", file=sys.stderr)
        sys.exit(2)
    return functions
