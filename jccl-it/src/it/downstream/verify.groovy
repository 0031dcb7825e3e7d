// Runs after the downstream build (examples/downstream) succeeded: what a user would see in its log.
// Fails jccl's build when the compiler warned about filename-based automodules (a jar without
// Automatic-Module-Name) or when either run of the program is missing a rank's "right" line.
File log = new File(basedir, 'build.log')
assert log.isFile(): "no build.log in ${basedir}"
String text = log.getText('UTF-8')

def automodule = text.readLines().findAll { it.contains('filename-based automodules') }
assert automodule.isEmpty(): "the downstream build warned about filename-based automodules (a jccl jar lacks " +
        "Automatic-Module-Name in its manifest):\n" + automodule.join('\n')

// Four ranks as threads of one JVM, on the module path.
for (int r = 0; r < 4; r++) {
    String line = "rank ${r} of 4: sum 10.0 in all 65536 elements: right"
    assert text.readLines().any { it == line }: "missing '${line}' (module-path run, 4 in-JVM ranks) in ${log}"
}
// Three processes started by jccl run: each line carries its rank's prefix.
for (int r = 0; r < 3; r++) {
    String line = "[${r}] rank ${r} of 3: sum 6.0 in all 65536 elements: right"
    assert text.readLines().any { it == line }: "missing '${line}' (jccl run -np 3) in ${log}"
}
// `jccl perf -np 2` on the module path: its ranks checked every result.
assert text.readLines().any { it.startsWith('# Out of bounds values : 0 OK') }: "missing the perf run's '# Out of bounds values : 0 OK' (module path) in ${log}"
assert text.readLines().any { it.startsWith('# Collective test concluded: all_reduce_perf') }: "the perf run on the module path did not conclude, in ${log}"
assert !text.contains('WRONG'): "a rank found a wrong element:\n" + text.readLines().findAll { it.contains('WRONG') }.join('\n')
return true
