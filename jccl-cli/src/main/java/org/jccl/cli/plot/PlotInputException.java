package org.jccl.cli.plot;

/** A file given to the plot that cannot be drawn; the message names it, the cause and what to give instead. */
public final class PlotInputException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public PlotInputException(String message) {
        super(message);
    }
}
