package org.jccl.cli.arch;

import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * jccl-cli's packages on the compiled main classes: one package per command family, none in a cycle;
 * only the entry point (org.jccl.cli.JcclCli) knows every command, and no command reaches back up to it.
 */
class CliLayeringTest {

    private static JavaClasses main;

    @BeforeAll
    static void importMain() {
        main = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS).importPackages("org.jccl.cli");
        assertTrue(main.size() > 30, "imported only " + main.size() + " classes");
    }

    @Test
    void noPackageCycle() {
        slices().matching("org.jccl.cli.(*)..").should().beFreeOfCycles().check(main);
    }

    @Test
    void noCommandDependsOnTheEntryPointPackage() {
        noClasses().that().resideInAPackage("org.jccl.cli.*..").should().dependOnClassesThat().resideInAPackage("org.jccl.cli")
                .check(main);
    }
}
