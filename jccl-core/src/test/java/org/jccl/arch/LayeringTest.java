package org.jccl.arch;

import static com.tngtech.archunit.base.DescribedPredicate.not;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.belongToAnyOf;
import static com.tngtech.archunit.core.domain.JavaClass.Predicates.resideInAPackage;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.library.Architectures.layeredArchitecture;
import static com.tngtech.archunit.library.dependencies.SlicesRuleDefinition.slices;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.library.dependencies.SliceAssignment;
import com.tngtech.archunit.library.dependencies.SliceIdentifier;
import org.jccl.Config;
import org.jccl.Jccl;
import org.jccl.JcclId;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The layers of jccl-core (docs/ARCHITECTURE.md, "Layers and packages"), checked on the compiled main classes:
 * no package cycle, and no package using one of a layer above it. Bottom up:
 *
 * <pre>
 *   org.jccl (values, exceptions)      org.jccl.spi
 *   internal.config (settings: JDK and the API only)
 *   internal.log
 *   internal.net, reduce, tune, util, guard, topo
 *   internal.bootstrap, launch
 *   internal.transport.*
 *   internal.algo (against CollectiveContext, which the runtime implements)
 *   internal.control
 *   internal.runtime
 *   internal.doctor
 *   facades: Jccl, Config.fromEnvironment, JcclId.create (may call into any layer)
 * </pre>
 *
 * <p>The three facade classes live in the API package, so their calls into the internals are the
 * only edges from {@code org.jccl} upward; no other API class may have one.
 */
class LayeringTest {

    private static JavaClasses main;

    /** The API's entry points: Jccl, Config and JcclId (with their nested types). */
    private static final DescribedPredicate<JavaClass> FACADES = belongToAnyOf(Jccl.class, Config.class, JcclId.class)
            .as("the facades Jccl, Config, JcclId");

    private static final DescribedPredicate<JavaClass> INTERNAL = resideInAPackage("org.jccl.internal..").as("jccl's internals");

    @BeforeAll
    static void importMain() {
        main = new ClassFileImporter().withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS).importPackages("org.jccl");
        // Rules over no classes would pass: make sure the import found jccl-core's classes.
        assertTrue(main.size() > 200, "imported only " + main.size() + " classes");
        assertTrue(main.contain(org.jccl.internal.runtime.CommunicatorImpl.class));
    }

    @Test
    void noPackageCycle() {
        slices().assignedFrom(new SliceAssignment() {
            @Override
            public SliceIdentifier getIdentifierOf(JavaClass c) {
                return c.getPackageName().startsWith("org.jccl") ? SliceIdentifier.of(c.getPackageName()) : SliceIdentifier.ignore();
            }

            @Override
            public String getDescription() {
                return "the packages of jccl-core";
            }
        }).should().beFreeOfCycles().ignoreDependency(FACADES, INTERNAL).check(main);
    }

    @Test
    void everyPackageUsesOnlyTheLayersBelowIt() {
        layeredArchitecture().consideringOnlyDependenciesInLayers()
                .layer("api").definedBy("org.jccl")
                .layer("spi").definedBy("org.jccl.spi")
                .layer("settings").definedBy("org.jccl.internal.config")
                .layer("log").definedBy("org.jccl.internal.log")
                .layer("foundations").definedBy("org.jccl.internal.net", "org.jccl.internal.reduce", "org.jccl.internal.tune",
                        "org.jccl.internal.util", "org.jccl.internal.guard", "org.jccl.internal.topo")
                .layer("bootstrap").definedBy("org.jccl.internal.bootstrap", "org.jccl.internal.launch")
                .layer("transports").definedBy("org.jccl.internal.transport..")
                .layer("algo").definedBy("org.jccl.internal.algo")
                .layer("control").definedBy("org.jccl.internal.control")
                .layer("runtime").definedBy("org.jccl.internal.runtime")
                .layer("doctor").definedBy("org.jccl.internal.doctor")
                .whereLayer("doctor").mayNotBeAccessedByAnyLayer()
                .whereLayer("runtime").mayOnlyBeAccessedByLayers("doctor")
                .whereLayer("control").mayOnlyBeAccessedByLayers("runtime", "doctor")
                .whereLayer("algo").mayOnlyBeAccessedByLayers("runtime", "doctor")
                .whereLayer("transports").mayOnlyBeAccessedByLayers("algo", "control", "runtime", "doctor")
                .whereLayer("bootstrap").mayOnlyBeAccessedByLayers("transports", "algo", "control", "runtime", "doctor")
                .whereLayer("foundations").mayOnlyBeAccessedByLayers("bootstrap", "transports", "algo", "control", "runtime", "doctor")
                .whereLayer("log").mayOnlyBeAccessedByLayers("foundations", "bootstrap", "transports", "algo", "control", "runtime",
                        "doctor")
                .whereLayer("settings").mayOnlyBeAccessedByLayers("log", "foundations", "bootstrap", "transports", "algo", "control",
                        "runtime", "doctor")
                .ignoreDependency(FACADES, INTERNAL)
                .check(main);
    }

    @Test
    void onlyTheFacadesOfTheApiReachIntoTheInternals() {
        classes().that().resideInAPackage("org.jccl").and(not(FACADES))
                .should().onlyDependOnClassesThat().resideOutsideOfPackage("org.jccl.internal..")
                .check(main);
    }

    @Test
    void theSpiIsBuiltOnTheApiAndTheJdkOnly() {
        classes().that().resideInAPackage("org.jccl.spi")
                .should().onlyDependOnClassesThat().resideInAnyPackage("java..", "org.jccl", "org.jccl.spi")
                .check(main);
    }

    @Test
    void theSettingsAreBuiltOnTheApiAndTheJdkOnly() {
        classes().that().resideInAPackage("org.jccl.internal.config")
                .should().onlyDependOnClassesThat().resideInAnyPackage("java..", "org.jccl", "org.jccl.internal.config")
                .check(main);
    }
}
