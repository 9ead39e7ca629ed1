/** The six reasoning choices every door knows, in order. The one definition of the list. */
export const THINKING_LEVELS = ["default", "low", "medium", "high", "x_high", "max"] as const;
export type ThinkingLevel = (typeof THINKING_LEVELS)[number];
