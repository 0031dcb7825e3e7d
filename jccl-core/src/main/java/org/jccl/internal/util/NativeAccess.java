package org.jccl.internal.util;

/** How to grant jccl native access, in the form that fits how it was loaded (class path or module path). */
public final class NativeAccess {

    private NativeAccess() {
    }

    /**
     * The java flag that grants jccl native access: {@code --enable-native-access=ALL-UNNAMED} on the
     * class path, {@code --enable-native-access=org.jccl.core} when jccl runs as a named module.
     */
    public static String flag() {
        Module m = NativeAccess.class.getModule();
        return "--enable-native-access=" + (m.isNamed() ? m.getName() : "ALL-UNNAMED");
    }
}
