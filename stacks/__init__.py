"""The CDK constructs and the two stacks that compose them."""
