/* A shared object without the descriptor symbol. */
int not_a_plugin(void);
int not_a_plugin(void) {
  return 42;
}
