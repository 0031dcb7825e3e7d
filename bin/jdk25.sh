# shellcheck shell=bash
# Finds a JDK 25 or newer for ./mvnw and bin/jccl. Source it, then call jccl_find_jdk25:
#
#   . "$root/bin/jdk25.sh"
#   jccl_find_jdk25 || exit 1
#
# On success JAVA_HOME is exported and $JAVA_HOME/bin is first on PATH. Order of preference:
#   1. JAVA_HOME, when its java is 25 or newer (an explicit choice wins);
#   2. the newest JDK >= 25 under /usr/lib/jvm (where Debian/Ubuntu and the Adoptium packages put them);
#   3. a <toolchain> of type jdk with version >= 25 in ~/.m2/toolchains.xml.
# Otherwise it prints what it looked at and how to install one, and returns 1.

JCCL_MIN_JAVA=25

# Prints the feature version (25 for "25.0.3", 8 for "1.8.0_402") of the JDK at $1, or nothing.
# The release file is read first because it costs no JVM start; every rank of a job runs this.
jccl_java_feature() {
    local home="$1" v=""
    [ -x "$home/bin/java" ] || return 0
    if [ -r "$home/release" ]; then
        v=$(sed -n 's/^JAVA_VERSION="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$home/release" | head -n 1)
    fi
    if [ -z "$v" ]; then
        v=$("$home/bin/java" -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n 1)
    fi
    case "$v" in
        1.*) v=${v#1.} ;;
    esac
    v=${v%%[!0-9]*}
    [ -n "$v" ] && printf '%s\n' "$v"
    return 0
}

# Prints the full version string of the JDK at $1 (for ordering JDKs of the same feature version).
jccl_java_full() {
    local home="$1" v=""
    if [ -r "$home/release" ]; then
        v=$(sed -n 's/^JAVA_VERSION="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$home/release" | head -n 1)
    fi
    printf '%s\n' "${v:-0}"
}

# True when the JDK at $1 is JCCL_MIN_JAVA or newer.
jccl_java_ok() {
    local f
    f=$(jccl_java_feature "$1")
    [ -n "$f" ] && [ "$f" -ge "$JCCL_MIN_JAVA" ]
}

# Prints the newest JDK >= 25 under /usr/lib/jvm (or $JCCL_JVM_DIR, which tests use), or nothing.
jccl_jdk_from_jvm_dir() {
    local dir="${JCCL_JVM_DIR:-/usr/lib/jvm}" d f
    [ -d "$dir" ] || return 0
    for d in "$dir"/*/; do
        d=${d%/}
        f=$(jccl_java_feature "$d")
        if [ -n "$f" ] && [ "$f" -ge "$JCCL_MIN_JAVA" ]; then
            # "feature full path": sort -V on the first two fields puts the newest last.
            printf '%s %s %s\n' "$f" "$(jccl_java_full "$d")" "$d"
        fi
    done | sort -k1,1n -k2,2V | tail -n 1 | cut -d' ' -f3-
}

# Prints the jdkHome of the newest toolchain with version >= 25 in ~/.m2/toolchains.xml, or nothing.
# A small text scan, not an XML parser: toolchains.xml is a flat, generated list in practice.
jccl_jdk_from_toolchains() {
    local file="${JCCL_TOOLCHAINS:-$HOME/.m2/toolchains.xml}"
    [ -r "$file" ] || return 0
    tr -d '\r\n' < "$file" | sed 's#</toolchain>#&\n#g' | while IFS= read -r entry; do
        case "$entry" in
            *"<type>jdk</type>"*) ;;
            *) continue ;;
        esac
        local version home feature
        version=$(printf '%s' "$entry" | sed -n 's#.*<version>[[:space:]]*\[\{0,1\}\([0-9.]*\).*</version>.*#\1#p')
        home=$(printf '%s' "$entry" | sed -n 's#.*<jdkHome>[[:space:]]*\([^<]*[^<[:space:]]\)[[:space:]]*</jdkHome>.*#\1#p')
        case "$version" in
            1.*) version=${version#1.} ;;
        esac
        feature=${version%%[!0-9]*}
        if [ -n "$feature" ] && [ "$feature" -ge "$JCCL_MIN_JAVA" ] && [ -n "$home" ] && jccl_java_ok "$home"; then
            printf '%s %s\n' "$feature" "$home"
        fi
    done | sort -k1,1n | tail -n 1 | cut -d' ' -f2-
}

jccl_find_jdk25() {
    local found=""
    if [ -n "${JAVA_HOME:-}" ] && jccl_java_ok "$JAVA_HOME"; then
        found="$JAVA_HOME"
    fi
    [ -n "$found" ] || found=$(jccl_jdk_from_jvm_dir)
    [ -n "$found" ] || found=$(jccl_jdk_from_toolchains)
    if [ -z "$found" ]; then
        local dir="${JCCL_JVM_DIR:-/usr/lib/jvm}" have="" d f
        for d in "$dir"/*/; do
            [ -d "$d" ] || continue
            d=${d%/}
            f=$(jccl_java_feature "$d")
            have="$have ${d##*/}${f:+ (Java $f)},"
        done
        have=${have%,}
        local jh="${JAVA_HOME:-unset}"
        if [ -n "${JAVA_HOME:-}" ]; then
            f=$(jccl_java_feature "$JAVA_HOME")
            if [ -n "$f" ]; then jh="$JAVA_HOME (Java $f)"; else jh="$JAVA_HOME (no bin/java there)"; fi
        fi
        echo "jccl needs a JDK 25 or newer; none found (JAVA_HOME=$jh, $dir has:${have:- nothing}, ~/.m2/toolchains.xml: no jdk >= 25). Install one, e.g. Eclipse Temurin 25 (apt package temurin-25-jdk from the Adoptium repository) and set JAVA_HOME." >&2
        return 1
    fi
    JAVA_HOME="$found"
    export JAVA_HOME
    PATH="$JAVA_HOME/bin:$PATH"
    export PATH
    return 0
}
